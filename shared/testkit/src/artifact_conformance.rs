//! The `ArtifactService` conformance suite: every artifact rule of `docs/semantics.md`
//! (Artifacts, and the file-name rule of Identifiers) as a check, run against the core
//! service over each backend — memory, Redis, Redis Cluster, a rule-less map — and
//! through the gRPC client, so they cannot drift apart.
//!
//! Every case uses its own app name, so the suite can share a store with other tests.

use crate::unique_prefix;
use adk_grpc_core::artifact::{
    DeleteRequest, ListRequest, LoadRequest, MAX_CHUNK_BYTES, MAX_VERSION, SaveRequest, TEXT_MIME_TYPE, UploadRequest,
    VersionsRequest,
};
use adk_grpc_core::{
    AdkError, ArtifactMetadata, ArtifactService, ByteStream, CreateRequest, Part, PartKind, SessionService,
};
use chrono::Utc;
use futures::{StreamExt, TryStreamExt, stream};
use serde_json::{Value, json};
use std::collections::HashMap;
use tonic::Code;

/// What the suite must know about the service under test.
#[derive(Debug, Clone, Copy)]
pub struct ArtifactLimits {
    /// The service's `max_artifact_bytes`: one byte more must be refused.
    pub max_artifact_bytes: u64,
    /// The service's storage chunk size: the multi-chunk case uploads 3.5 chunks.
    pub chunk_bytes: usize,
}

impl Default for ArtifactLimits {
    /// The stores' defaults: 256 MiB, 1 MiB chunks.
    fn default() -> Self {
        ArtifactLimits {
            max_artifact_bytes: 256 * 1024 * 1024,
            chunk_bytes: adk_grpc_core::artifact::DEFAULT_CHUNK_BYTES,
        }
    }
}

/// One `#[tokio::test]` per case of the artifact suite, each on the [`crate::Fixture`]
/// `$setup` builds (an expression that may `.await`), within the fixture's limits.
#[macro_export]
macro_rules! artifact_conformance_tests {
    ($setup:expr) => {
        $crate::conformance_cases!($setup; artifact_conformance; |fixture| (fixture.artifact_service(), fixture.limits());
            versions_start_at_one_and_count_up,
            explicit_versions_are_immutable,
            parts_load_back_as_saved,
            display_names_come_back_on_every_read,
            missing_artifacts_are_not_found,
            delete_one_version_then_the_rest,
            delete_all_versions,
            deleting_missing_artifacts_succeeds,
            list_is_sorted_and_scoped,
            user_names_are_shared_by_the_users_sessions_only,
            concurrent_saves_get_distinct_versions,
            metadata_is_readable_without_the_bytes,
            multi_chunk_uploads_download_identically,
            failed_uploads_leave_nothing,
            oversized_uploads_are_refused,
            declared_sizes_must_match_the_bytes,
            bad_input_is_rejected_and_changes_nothing,
            user_names_need_no_session,
            file_uris_load_back_and_references_resolve,
            references_stay_in_their_scope,
            reference_chains_are_bounded,
            hostile_ids_keep_artifacts_apart,
            versions_end_at_the_maximum,
            errors_are_worded_alike,
        );
    };
}

/// DeleteSession and the session's artifacts, for a session store and the artifact
/// store deployed with it (the same process, or the same Redis): deleting a session
/// deletes its session-scoped artifacts and nothing else, and a session re-created
/// under the same id starts with none of them. The fixture holds both services.
#[macro_export]
macro_rules! session_delete_conformance_tests {
    ($setup:expr) => {
        $crate::conformance_cases!($setup; artifact_conformance; |fixture| (fixture.session_service(), fixture.artifact_service(), fixture.limits());
            deleting_a_session_deletes_its_artifacts,
        );
    };
}

// ---------- helpers ----------

/// Where requests go: (app, user, session).
#[derive(Clone)]
struct Loc {
    app: String,
    user: String,
    session: String,
}

impl Loc {
    fn new(app: &str, user: &str, session: &str) -> Loc {
        Loc {
            app: app.into(),
            user: user.into(),
            session: session.into(),
        }
    }

    fn save_req(&self, name: &str, part: Part, version: Option<i64>) -> SaveRequest {
        SaveRequest {
            app_name: self.app.clone(),
            user_id: self.user.clone(),
            session_id: self.session.clone(),
            file_name: name.into(),
            part,
            version,
        }
    }

    fn load_req(&self, name: &str, version: Option<i64>) -> LoadRequest {
        LoadRequest {
            app_name: self.app.clone(),
            user_id: self.user.clone(),
            session_id: self.session.clone(),
            file_name: name.into(),
            version,
        }
    }

    fn delete_req(&self, name: &str, version: Option<i64>) -> DeleteRequest {
        DeleteRequest {
            app_name: self.app.clone(),
            user_id: self.user.clone(),
            session_id: self.session.clone(),
            file_name: name.into(),
            version,
        }
    }

    fn versions_req(&self, name: &str) -> VersionsRequest {
        VersionsRequest {
            app_name: self.app.clone(),
            user_id: self.user.clone(),
            session_id: self.session.clone(),
            file_name: name.into(),
        }
    }

    fn list_req(&self) -> ListRequest {
        ListRequest {
            app_name: self.app.clone(),
            user_id: self.user.clone(),
            session_id: self.session.clone(),
        }
    }

    fn upload_req(&self, name: &str, mime_type: &str) -> UploadRequest {
        UploadRequest {
            app_name: self.app.clone(),
            user_id: self.user.clone(),
            session_id: self.session.clone(),
            file_name: name.into(),
            mime_type: mime_type.into(),
            ..Default::default()
        }
    }
}

fn text(s: &str) -> Part {
    Part::text_part(s)
}

async fn save(svc: &dyn ArtifactService, at: &Loc, name: &str, part: Part) -> i64 {
    svc.save(at.save_req(name, part, None))
        .await
        .unwrap_or_else(|e| panic!("save {name} in {}/{}/{}: {e}", at.app, at.user, at.session))
        .version
}

async fn load(svc: &dyn ArtifactService, at: &Loc, name: &str, version: Option<i64>) -> Part {
    svc.load(at.load_req(name, version))
        .await
        .unwrap_or_else(|e| panic!("load {name} version {version:?}: {e}"))
        .part
}

async fn versions(svc: &dyn ArtifactService, at: &Loc, name: &str) -> Vec<i64> {
    svc.versions(at.versions_req(name))
        .await
        .unwrap_or_else(|e| panic!("versions of {name}: {e}"))
        .versions
}

async fn list(svc: &dyn ArtifactService, at: &Loc) -> Vec<String> {
    svc.list(at.list_req())
        .await
        .unwrap_or_else(|e| panic!("list {}/{}/{}: {e}", at.app, at.user, at.session))
        .file_names
}

async fn delete(svc: &dyn ArtifactService, at: &Loc, name: &str, version: Option<i64>) {
    svc.delete(at.delete_req(name, version))
        .await
        .unwrap_or_else(|e| panic!("delete {name} version {version:?}: {e}"));
}

/// The whole version and every piece's length, read through `download`.
async fn download(
    svc: &dyn ArtifactService,
    req: LoadRequest,
    chunk_bytes: usize,
) -> Result<(ArtifactMetadata, Vec<u8>, Vec<usize>), AdkError> {
    let (metadata, pieces) = svc.download(req, chunk_bytes).await?;
    let pieces: Vec<Vec<u8>> = pieces.try_collect().await?;
    let lengths = pieces.iter().map(Vec::len).collect();
    Ok((metadata, pieces.concat(), lengths))
}

/// `bytes` as a stream of pieces of `piece` bytes (the last may be shorter).
fn pieces(bytes: &[u8], piece: usize) -> ByteStream {
    let pieces: Vec<Result<Vec<u8>, AdkError>> = bytes.chunks(piece).map(|p| Ok(p.to_vec())).collect();
    stream::iter(pieces).boxed()
}

/// Deterministic bytes without a period that chunk sizes could hide.
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

fn expect_code<T>(result: Result<T, AdkError>, code: Code, context: &str) -> AdkError {
    match result {
        Ok(_) => panic!("{context}: expected {code:?}, got Ok"),
        Err(err) => {
            assert_eq!(err.code(), code, "{context}: expected {code:?}, got {err}");
            err
        }
    }
}

/// Everything visible from one session: names, and each name's versions with their bytes.
type Snapshot = (Vec<String>, Vec<(String, Vec<(i64, Vec<u8>)>)>);

async fn snapshot(svc: &dyn ArtifactService, at: &Loc) -> Snapshot {
    let names = list(svc, at).await;
    let mut contents = Vec::new();
    for name in &names {
        let mut stored = Vec::new();
        for v in versions(svc, at, name).await {
            let (_, bytes, _) = download(svc, at.load_req(name, Some(v)), 0)
                .await
                .unwrap_or_else(|e| panic!("download {name} v{v}: {e}"));
            stored.push((v, bytes));
        }
        contents.push((name.clone(), stored));
    }
    (names, contents)
}

async fn assert_absent(svc: &dyn ArtifactService, at: &Loc, name: &str, context: &str) {
    assert_eq!(
        versions(svc, at, name).await,
        Vec::<i64>::new(),
        "{context}: no versions"
    );
    assert!(
        !list(svc, at).await.contains(&name.to_string()),
        "{context}: not listed"
    );
    expect_code(svc.load(at.load_req(name, None)).await, Code::NotFound, context);
}

// ---------- cases ----------

pub async fn versions_start_at_one_and_count_up(svc: &dyn ArtifactService, _: ArtifactLimits) {
    let at = Loc::new(&unique_prefix("art-versions"), "u", "s");
    for (i, content) in ["one", "two", "three"].into_iter().enumerate() {
        let version = save(svc, &at, "notes.txt", text(content)).await;
        assert_eq!(version, i as i64 + 1, "versions start at 1 and count up");
    }
    assert_eq!(versions(svc, &at, "notes.txt").await, [3, 2, 1], "newest first");
    assert_eq!(load(svc, &at, "notes.txt", None).await, text("three"), "latest");
    assert_eq!(
        load(svc, &at, "notes.txt", Some(1)).await,
        text("one"),
        "a given version"
    );
    assert_eq!(load(svc, &at, "notes.txt", Some(2)).await, text("two"));
    assert_eq!(
        save(svc, &at, "other.txt", text("x")).await,
        1,
        "each name counts on its own"
    );
}

pub async fn explicit_versions_are_immutable(svc: &dyn ArtifactService, _: ArtifactLimits) {
    let at = Loc::new(&unique_prefix("art-explicit"), "u", "s");
    let saved = svc
        .save(at.save_req("f.txt", text("five"), Some(5)))
        .await
        .expect("explicit");
    assert_eq!(saved.version, 5, "an explicit version is used as given");
    let again = svc.save(at.save_req("f.txt", text("other"), Some(5))).await;
    let err = expect_code(again, Code::AlreadyExists, "explicit version taken");
    assert!(err.to_string().contains('5'), "{err}");
    let mut taken = at.upload_req("f.txt", "text/plain");
    taken.version = Some(5);
    let upload = svc.upload(taken, pieces(b"other", 2)).await;
    expect_code(upload, Code::AlreadyExists, "explicit version taken (upload)");
    assert_eq!(
        load(svc, &at, "f.txt", Some(5)).await,
        text("five"),
        "the taken version is unchanged"
    );
    assert_eq!(
        save(svc, &at, "f.txt", text("six")).await,
        6,
        "the next version follows the highest"
    );
    let two = svc
        .save(at.save_req("f.txt", text("two"), Some(2)))
        .await
        .expect("a free lower version");
    assert_eq!(two.version, 2);
    assert_eq!(versions(svc, &at, "f.txt").await, [6, 5, 2]);
    assert_eq!(
        load(svc, &at, "f.txt", None).await,
        text("six"),
        "latest is the highest version"
    );
}

pub async fn parts_load_back_as_saved(svc: &dyn ArtifactService, _: ArtifactLimits) {
    let at = Loc::new(&unique_prefix("art-parts"), "u", "s");
    let all_bytes: Vec<u8> = (0..=255u8).collect();
    let cases = [
        ("hello.txt", text("héllo wörld ✓")),
        ("image.png", Part::inline_data("image/png", all_bytes.clone())),
        ("text-as-data.txt", Part::inline_data("text/plain", b"plain".to_vec())),
        ("empty.bin", Part::inline_data("application/octet-stream", Vec::new())),
        (
            "a/b/nested:{name}.json",
            Part::inline_data("application/json", b"{}".to_vec()),
        ),
        ("link.png", Part::file_data("image/png", "gs://bucket/x.png")),
        ("link-without-type", Part::file_data("", "https://example.com/a?b=c")),
    ];
    for (name, part) in &cases {
        save(svc, &at, name, part.clone()).await;
    }
    for (name, part) in &cases {
        let loaded = svc.load(at.load_req(name, None)).await.expect("load");
        assert_eq!(&loaded.part, part, "{name} loads back as saved");
        assert_eq!(loaded.metadata.file_name, *name);
        assert_eq!(loaded.metadata.version, 1);
        match &part.kind {
            PartKind::Text { text } => {
                assert!(loaded.metadata.is_text, "{name}: a text part is recorded as text");
                assert_eq!(loaded.metadata.mime_type, TEXT_MIME_TYPE);
                assert_eq!(loaded.metadata.size_bytes, text.len() as u64);
            }
            PartKind::InlineData { mime_type, data } => {
                assert!(!loaded.metadata.is_text, "{name}: inline data stays inline data");
                assert!(!loaded.metadata.is_file_uri, "{name}: inline data is no file URI");
                assert_eq!(&loaded.metadata.mime_type, mime_type);
                assert_eq!(loaded.metadata.size_bytes, data.len() as u64);
            }
            _ => {
                let uri = part.file_uri().expect("a file_data part");
                assert!(
                    loaded.metadata.is_file_uri,
                    "{name}: file data is recorded as a file URI"
                );
                assert!(!loaded.metadata.is_text, "{name}: file data is no text");
                assert_eq!(Some(loaded.metadata.mime_type.as_str()), part.mime_type());
                assert_eq!(loaded.metadata.size_bytes, uri.len() as u64);
            }
        }
    }
}

/// A part's `display_name` (inline or file data) is stored with its version and given
/// back by every read: load, metadata, download, an upload that declares one, and a
/// reference (which loads as its target, with the target's name). Too long a name is
/// `INVALID_ARGUMENT` naming `display_name`, and stores nothing.
pub async fn display_names_come_back_on_every_read(svc: &dyn ArtifactService, _: ArtifactLimits) {
    let at = Loc::new(&unique_prefix("art-display"), "u", "s");
    let named = |mut part: Part, name: &str| {
        part.display_name = Some(name.into());
        part
    };
    let chart = named(Part::inline_data("image/png", vec![1, 2, 3]), "Q3 chart.png");
    let report = named(Part::file_data("application/pdf", "gs://b/r.pdf"), "Report (final)");
    save(svc, &at, "chart.png", chart.clone()).await;
    save(svc, &at, "report", report.clone()).await;
    save(svc, &at, "plain.png", Part::inline_data("image/png", vec![9])).await;
    for (name, part, display_name) in [
        ("chart.png", &chart, Some("Q3 chart.png")),
        ("report", &report, Some("Report (final)")),
        ("plain.png", &Part::inline_data("image/png", vec![9]), None),
    ] {
        let loaded = svc.load(at.load_req(name, None)).await.expect("load");
        assert_eq!(
            &loaded.part, part,
            "{name}: load gives the part back with its display name"
        );
        assert_eq!(
            loaded.metadata.display_name.as_deref(),
            display_name,
            "{name}: load's metadata"
        );
        let metadata = svc.metadata(at.load_req(name, Some(1))).await.expect("metadata");
        assert_eq!(metadata.display_name.as_deref(), display_name, "{name}: metadata");
        let (metadata, _) = svc.download(at.load_req(name, None), 0).await.expect("download");
        assert_eq!(
            metadata.display_name.as_deref(),
            display_name,
            "{name}: download's metadata"
        );
    }

    // An upload declares it in its header.
    let upload = UploadRequest {
        display_name: Some("Big upload".into()),
        ..at.upload_req("big.bin", "application/octet-stream")
    };
    svc.upload(upload, pieces(b"bytes", 2)).await.expect("upload");
    assert_eq!(
        load(svc, &at, "big.bin", None).await,
        named(
            Part::inline_data("application/octet-stream", b"bytes".to_vec()),
            "Big upload"
        )
    );

    // A reference loads as its target, display name included.
    save(svc, &at, "ref", reference(artifact_uri(&at, "chart.png", 1))).await;
    assert_eq!(load(svc, &at, "ref", None).await, chart);

    let before = snapshot(svc, &at).await;
    let too_long = named(Part::inline_data("image/png", vec![1]), &"n".repeat(1025));
    let err = expect_code(
        svc.save(at.save_req("chart.png", too_long, None)).await,
        Code::InvalidArgument,
        "a display name over 1024 bytes",
    );
    assert!(err.to_string().starts_with("display_name "), "{err}");
    let with_nul = UploadRequest {
        display_name: Some("a\0b".into()),
        ..at.upload_req("chart.png", "image/png")
    };
    let err = expect_code(
        svc.upload(with_nul, pieces(b"x", 1)).await,
        Code::InvalidArgument,
        "a display name with NUL",
    );
    assert!(err.to_string().starts_with("display_name "), "{err}");
    assert_eq!(
        snapshot(svc, &at).await,
        before,
        "a refused display name stores nothing"
    );
}

pub async fn missing_artifacts_are_not_found(svc: &dyn ArtifactService, _: ArtifactLimits) {
    let at = Loc::new(&unique_prefix("art-missing"), "u", "s");
    save(svc, &at, "there.txt", text("x")).await;
    for (name, version, context) in [
        ("nothing.txt", None, "missing name"),
        ("nothing.txt", Some(1), "missing name with a version"),
        ("there.txt", Some(2), "missing version"),
        ("user:nothing", None, "missing user: name"),
    ] {
        expect_code(svc.load(at.load_req(name, version)).await, Code::NotFound, context);
        expect_code(svc.metadata(at.load_req(name, version)).await, Code::NotFound, context);
        let download = svc.download(at.load_req(name, version), 0).await;
        expect_code(download.map(|_| ()), Code::NotFound, context);
    }
    assert_eq!(
        versions(svc, &at, "nothing.txt").await,
        Vec::<i64>::new(),
        "versions of an unknown name: empty"
    );
    assert_eq!(list(svc, &Loc::new(&at.app, "u", "empty")).await, Vec::<String>::new());
}

pub async fn delete_one_version_then_the_rest(svc: &dyn ArtifactService, _: ArtifactLimits) {
    let at = Loc::new(&unique_prefix("art-del-one"), "u", "s");
    for content in ["v1", "v2", "v3"] {
        save(svc, &at, "f.txt", text(content)).await;
    }
    delete(svc, &at, "f.txt", Some(2)).await;
    assert_eq!(versions(svc, &at, "f.txt").await, [3, 1]);
    expect_code(
        svc.load(at.load_req("f.txt", Some(2))).await,
        Code::NotFound,
        "deleted version",
    );
    assert_eq!(load(svc, &at, "f.txt", None).await, text("v3"));
    delete(svc, &at, "f.txt", Some(3)).await;
    assert_eq!(load(svc, &at, "f.txt", None).await, text("v1"), "latest falls back");
    assert_eq!(
        save(svc, &at, "f.txt", text("v4")).await,
        4,
        "a deleted latest version's number is not reused while versions remain"
    );
    assert_eq!(list(svc, &at).await, ["f.txt"]);
    delete(svc, &at, "f.txt", Some(1)).await;
    delete(svc, &at, "f.txt", Some(4)).await;
    assert_absent(svc, &at, "f.txt", "after deleting every version").await;
    assert_eq!(
        save(svc, &at, "f.txt", text("again")).await,
        1,
        "numbering starts over once every version is gone"
    );
}

pub async fn delete_all_versions(svc: &dyn ArtifactService, _: ArtifactLimits) {
    let at = Loc::new(&unique_prefix("art-del-all"), "u", "s");
    for content in ["a", "b"] {
        save(svc, &at, "f.txt", text(content)).await;
        save(svc, &at, "user:g.txt", text(content)).await;
    }
    save(svc, &at, "keep.txt", text("k")).await;
    delete(svc, &at, "f.txt", None).await;
    delete(svc, &at, "user:g.txt", None).await;
    assert_absent(svc, &at, "f.txt", "session name after delete all").await;
    assert_absent(svc, &at, "user:g.txt", "user: name after delete all").await;
    assert_eq!(list(svc, &at).await, ["keep.txt"], "other names stay");
    assert_eq!(save(svc, &at, "f.txt", text("new")).await, 1);
}

pub async fn deleting_missing_artifacts_succeeds(svc: &dyn ArtifactService, _: ArtifactLimits) {
    let at = Loc::new(&unique_prefix("art-del-missing"), "u", "s");
    save(svc, &at, "f.txt", text("x")).await;
    delete(svc, &at, "nothing.txt", None).await;
    delete(svc, &at, "nothing.txt", Some(3)).await;
    delete(svc, &at, "f.txt", Some(7)).await;
    delete(svc, &Loc::new(&at.app, "nobody", "none"), "f.txt", None).await;
    assert_eq!(
        versions(svc, &at, "f.txt").await,
        [1],
        "deleting a missing version changes nothing"
    );
    assert_eq!(load(svc, &at, "f.txt", None).await, text("x"));
}

pub async fn list_is_sorted_and_scoped(svc: &dyn ArtifactService, _: ArtifactLimits) {
    let app = unique_prefix("art-list");
    let s1 = Loc::new(&app, "u", "s1");
    for name in ["b.txt", "user:z.txt", "a.txt", "Z.txt", "user:a.txt", "dir/c.txt"] {
        save(svc, &s1, name, text(name)).await;
    }
    save(svc, &s1, "a.txt", text("second version")).await;
    assert_eq!(
        list(svc, &s1).await,
        ["Z.txt", "a.txt", "b.txt", "dir/c.txt", "user:a.txt", "user:z.txt"],
        "session and user: names, sorted, each once"
    );
    assert_eq!(
        list(svc, &Loc::new(&app, "u", "s2")).await,
        ["user:a.txt", "user:z.txt"],
        "another session sees only the user: names"
    );
    assert_eq!(
        list(svc, &Loc::new(&app, "other", "s1")).await,
        Vec::<String>::new(),
        "another user"
    );
    let other_app = Loc::new(&unique_prefix("art-list-other"), "u", "s1");
    assert_eq!(list(svc, &other_app).await, Vec::<String>::new(), "another app");
}

pub async fn user_names_are_shared_by_the_users_sessions_only(svc: &dyn ArtifactService, _: ArtifactLimits) {
    let app = unique_prefix("art-user");
    let s1 = Loc::new(&app, "u", "s1");
    let s2 = Loc::new(&app, "u", "s2");
    assert_eq!(save(svc, &s1, "user:profile.png", text("from s1")).await, 1);
    assert_eq!(
        load(svc, &s2, "user:profile.png", None).await,
        text("from s1"),
        "visible from s2"
    );
    assert_eq!(
        save(svc, &s2, "user:profile.png", text("from s2")).await,
        2,
        "one version sequence across sessions"
    );
    assert_eq!(versions(svc, &s1, "user:profile.png").await, [2, 1]);
    assert_eq!(load(svc, &s1, "user:profile.png", None).await, text("from s2"));

    let other_user = Loc::new(&app, "v", "s1");
    let other_app = Loc::new(&unique_prefix("art-user-other"), "u", "s1");
    for (at, context) in [(&other_user, "another user"), (&other_app, "another app")] {
        let loaded = svc.load(at.load_req("user:profile.png", None)).await;
        expect_code(loaded, Code::NotFound, context);
        assert_eq!(
            versions(svc, at, "user:profile.png").await,
            Vec::<i64>::new(),
            "{context}"
        );
    }

    save(svc, &s1, "private.txt", text("s1 only")).await;
    expect_code(
        svc.load(s2.load_req("private.txt", None)).await,
        Code::NotFound,
        "a session name from another session",
    );
    assert_eq!(versions(svc, &s2, "private.txt").await, Vec::<i64>::new());
    assert_eq!(
        save(svc, &s2, "private.txt", text("s2's own")).await,
        1,
        "same name, own sequence"
    );
    assert_eq!(load(svc, &s1, "private.txt", None).await, text("s1 only"));
    delete(svc, &s2, "user:profile.png", None).await;
    assert_absent(svc, &s1, "user:profile.png", "a user: delete from s2 reaches s1").await;
}

pub async fn concurrent_saves_get_distinct_versions(svc: &dyn ArtifactService, _: ArtifactLimits) {
    let at = Loc::new(&unique_prefix("art-concurrent"), "u", "s");
    let saves = (0..50).map(|i| {
        let req = at.save_req("hot.txt", text(&format!("save {i}")), None);
        async move { (i, svc.save(req).await) }
    });
    let results = futures::future::join_all(saves).await;
    let mut got: Vec<i64> = Vec::new();
    for (i, result) in results {
        let version = result.unwrap_or_else(|e| panic!("concurrent save {i}: {e}")).version;
        assert_eq!(
            load(svc, &at, "hot.txt", Some(version)).await,
            text(&format!("save {i}")),
            "version {version} holds the bytes of the save that got it"
        );
        got.push(version);
    }
    got.sort_unstable();
    assert_eq!(got, (1..=50).collect::<Vec<i64>>(), "distinct, consecutive versions");
    assert_eq!(
        versions(svc, &at, "hot.txt").await,
        (1..=50).rev().collect::<Vec<i64>>()
    );
}

pub async fn metadata_is_readable_without_the_bytes(svc: &dyn ArtifactService, _: ArtifactLimits) {
    let at = Loc::new(&unique_prefix("art-meta"), "u", "s");
    let custom: HashMap<String, Value> = [
        ("author".to_string(), json!("alice")),
        ("pages".to_string(), json!(3)),
        ("tags".to_string(), json!({"a": [1, 2.5, null, true]})),
    ]
    .into_iter()
    .collect();
    let bytes = noise(1000, 7);
    let mut req = at.upload_req("report.pdf", "application/pdf");
    req.custom_metadata = custom.clone();
    let before = Utc::now();
    let saved = svc.upload(req, pieces(&bytes, 300)).await.expect("upload");
    assert_eq!(saved.version, 1);
    for version in [None, Some(1)] {
        let meta = svc
            .metadata(at.load_req("report.pdf", version))
            .await
            .expect("metadata");
        assert_eq!(meta.file_name, "report.pdf");
        assert_eq!(meta.version, 1);
        assert_eq!(meta.mime_type, "application/pdf");
        assert_eq!(meta.size_bytes, 1000);
        assert_eq!(meta.custom_metadata, custom, "custom metadata round-trips");
        assert!(!meta.is_text);
        let age = meta.create_time - before;
        assert!(
            age.num_seconds().abs() <= 5,
            "create time {} is close to now ({before})",
            meta.create_time
        );
        let (downloaded, got, _) = download(svc, at.load_req("report.pdf", version), 0)
            .await
            .expect("download");
        assert_eq!(downloaded, meta, "download reports the same metadata");
        assert_eq!(got, bytes);
    }
    save(svc, &at, "report.pdf", text("second")).await;
    let latest = svc.metadata(at.load_req("report.pdf", None)).await.expect("metadata");
    assert_eq!((latest.version, latest.is_text), (2, true));
    assert!(latest.custom_metadata.is_empty(), "save records no custom metadata");
}

pub async fn multi_chunk_uploads_download_identically(svc: &dyn ArtifactService, limits: ArtifactLimits) {
    let at = Loc::new(&unique_prefix("art-chunks"), "u", "s");
    let size = (limits.chunk_bytes * 7 / 2).min(limits.max_artifact_bytes as usize);
    let bytes = noise(size, 42);
    // Many small incoming pieces of an odd size, so they never line up with chunks.
    let saved = svc
        .upload(
            at.upload_req("big.bin", "application/octet-stream"),
            pieces(&bytes, 7919),
        )
        .await
        .expect("multi-chunk upload");
    assert_eq!(saved.version, 1);
    for piece in [
        0,
        4099,
        limits.chunk_bytes,
        limits.chunk_bytes + 1,
        2 * limits.chunk_bytes + 5,
        MAX_CHUNK_BYTES,
    ] {
        let (meta, got, lengths) = download(svc, at.load_req("big.bin", None), piece)
            .await
            .unwrap_or_else(|e| panic!("download in pieces of {piece}: {e}"));
        assert_eq!(meta.size_bytes, size as u64);
        assert!(got == bytes, "pieces of {piece} bytes reassemble the upload");
        let limit = if piece == 0 {
            MAX_CHUNK_BYTES
        } else {
            piece.min(MAX_CHUNK_BYTES)
        };
        assert!(
            lengths.iter().all(|&n| n > 0 && n <= limit),
            "pieces of {piece} bytes: got lengths {lengths:?}"
        );
    }
    let text_bytes = "añ€😀".repeat(limits.chunk_bytes / 4 + 3);
    let mut req = at.upload_req("text.txt", TEXT_MIME_TYPE);
    req.is_text = true;
    svc.upload(req, pieces(text_bytes.as_bytes(), 1001))
        .await
        .expect("text cut mid-character by pieces and chunks");
    assert_eq!(load(svc, &at, "text.txt", None).await, text(&text_bytes));
}

pub async fn failed_uploads_leave_nothing(svc: &dyn ArtifactService, limits: ArtifactLimits) {
    let at = Loc::new(&unique_prefix("art-failed"), "u", "s");
    save(svc, &at, "f.bin", Part::inline_data("x/y", b"v1".to_vec())).await;
    let half = noise(limits.chunk_bytes * 3 / 2, 3);
    for name in ["f.bin", "new.bin"] {
        let body = stream::iter(vec![
            Ok(half.clone()),
            Ok(half.clone()),
            Err(AdkError::Unavailable("the client went away".into())),
        ])
        .boxed();
        let result = svc.upload(at.upload_req(name, "x/y"), body).await;
        assert!(result.is_err(), "an upload whose stream fails, fails");
    }
    assert_eq!(
        versions(svc, &at, "f.bin").await,
        [1],
        "a failed upload adds no version"
    );
    assert_eq!(list(svc, &at).await, ["f.bin"], "nor a name");
    assert_eq!(
        load(svc, &at, "f.bin", None).await,
        Part::inline_data("x/y", b"v1".to_vec())
    );

    let mut not_text = at.upload_req("bad.txt", TEXT_MIME_TYPE);
    not_text.is_text = true;
    let body = stream::iter(vec![Ok(b"fine so far ".to_vec()), Ok(vec![0xff, 0xfe])]).boxed();
    let err = expect_code(
        svc.upload(not_text, body).await,
        Code::InvalidArgument,
        "text that is not UTF-8",
    );
    assert!(err.to_string().contains("UTF-8"), "{err}");
    assert_absent(svc, &at, "bad.txt", "after a refused text upload").await;
    assert_eq!(save(svc, &at, "new.bin", Part::inline_data("x/y", vec![1])).await, 1);
}

pub async fn oversized_uploads_are_refused(svc: &dyn ArtifactService, limits: ArtifactLimits) {
    let at = Loc::new(&unique_prefix("art-oversized"), "u", "s");
    let max = limits.max_artifact_bytes;
    let mut hinted = at.upload_req("big.bin", "x/y");
    hinted.size_hint = Some(max + 1);
    let err = expect_code(
        svc.upload(hinted, pieces(b"small", 5)).await,
        Code::ResourceExhausted,
        "a size hint above the maximum",
    );
    assert!(
        err.to_string().contains(&max.to_string()),
        "the message names the limit: {err}"
    );

    // No hint: the bytes themselves pass the limit. Generated lazily, so the test holds one piece.
    const PIECE: u64 = 64 * 1024;
    let body = stream::iter(0..(max + 1).div_ceil(PIECE)).map(move |i| {
        let len = PIECE.min(max + 1 - i * PIECE);
        Ok(vec![b'x'; len as usize])
    });
    let err = expect_code(
        svc.upload(at.upload_req("big.bin", "x/y"), body.boxed()).await,
        Code::ResourceExhausted,
        "bytes beyond the maximum",
    );
    assert!(err.to_string().contains("maximum size"), "{err}");
    assert_absent(svc, &at, "big.bin", "after oversized uploads").await;

    if max <= 8 * 1024 * 1024 {
        let exact = vec![b'y'; max as usize];
        let saved = svc
            .upload(at.upload_req("big.bin", "x/y"), pieces(&exact, 65_537))
            .await;
        assert_eq!(saved.expect("exactly the maximum fits").version, 1);
    }
}

/// An upload whose header declares `size_bytes` must send exactly that many bytes:
/// fewer (a truncated upload) or more fails with INVALID_ARGUMENT naming both numbers,
/// and stores nothing, whether the name is new or has versions.
pub async fn declared_sizes_must_match_the_bytes(svc: &dyn ArtifactService, limits: ArtifactLimits) {
    let at = Loc::new(&unique_prefix("art-declared"), "u", "s");
    save(svc, &at, "kept.bin", Part::inline_data("x/y", b"v1".to_vec())).await;
    let before = snapshot(svc, &at).await;
    // Bodies of several storage chunks too, so a backend that stores as it goes has something to discard.
    let big = limits.chunk_bytes as u64 * 2 + 7;
    let cases: [(u64, u64); 6] = [(100, 20), (10, 20), (0, 1), (1, 0), (big, big - 1), (big - 1, big)];
    for name in ["kept.bin", "new.bin"] {
        for (declared, sent) in cases {
            let mut upload = at.upload_req(name, "x/y");
            upload.size_hint = Some(declared);
            let body = noise(sent as usize, sent);
            let context = format!("{name}: size_bytes {declared}, {sent} bytes sent");
            let err = expect_code(
                svc.upload(upload, pieces(&body, 7_000)).await,
                Code::InvalidArgument,
                &context,
            );
            let message = err.to_string();
            assert!(message.contains("size_bytes"), "{context}: names the field: {message}");
            assert!(
                message.contains(&declared.to_string()),
                "{context}: names the declared size: {message}"
            );
            if sent < declared {
                // The whole body arrived, so the message can name its exact size.
                assert!(
                    message.contains(&sent.to_string()),
                    "{context}: names the size sent: {message}"
                );
            }
        }
    }
    assert_eq!(snapshot(svc, &at).await, before, "mismatched uploads store nothing");
    assert_absent(svc, &at, "new.bin", "after mismatched uploads").await;

    for (name, size) in [("exact.bin", big), ("empty.bin", 0)] {
        let mut upload = at.upload_req(name, "x/y");
        upload.size_hint = Some(size);
        let body = noise(size as usize, 9);
        let saved = svc.upload(upload, pieces(&body, 7_000)).await;
        assert_eq!(saved.expect("a matching declared size is stored").version, 1, "{name}");
        let (meta, bytes, _) = download(svc, at.load_req(name, None), 0).await.unwrap();
        assert_eq!((meta.size_bytes, bytes), (size, body), "{name}");
    }
}

pub async fn bad_input_is_rejected_and_changes_nothing(svc: &dyn ArtifactService, _: ArtifactLimits) {
    let at = Loc::new(&unique_prefix("art-bad"), "u", "s");
    save(svc, &at, "keep.txt", text("kept")).await;
    save(svc, &at, "user:keep.txt", text("kept too")).await;
    let before = snapshot(svc, &at).await;

    let long = "n".repeat(1025);
    for bad in ["", "a/../b", "..", "/etc/passwd", "user:/abs", "user:", "a\0b", &long] {
        let context = |op: &str| format!("{op} with file name {bad:?}");
        let err = expect_code(
            svc.save(at.save_req(bad, text("x"), None)).await,
            Code::InvalidArgument,
            &context("save"),
        );
        assert!(err.to_string().contains("file_name"), "{err}");
        let upload = svc.upload(at.upload_req(bad, "x/y"), pieces(b"x", 1)).await;
        expect_code(upload, Code::InvalidArgument, &context("upload"));
        expect_code(
            svc.load(at.load_req(bad, None)).await,
            Code::InvalidArgument,
            &context("load"),
        );
        expect_code(
            svc.metadata(at.load_req(bad, None)).await,
            Code::InvalidArgument,
            &context("metadata"),
        );
        let download = svc.download(at.load_req(bad, None), 0).await.map(|_| ());
        expect_code(download, Code::InvalidArgument, &context("download"));
        expect_code(
            svc.delete(at.delete_req(bad, None)).await,
            Code::InvalidArgument,
            &context("delete"),
        );
        expect_code(
            svc.versions(at.versions_req(bad)).await,
            Code::InvalidArgument,
            &context("versions"),
        );
    }

    for (app, user, session) in [
        ("a\nb", "u", "s"),
        ("", "u", "s"),
        (at.app.as_str(), "", "s"),
        (at.app.as_str(), " ", "s"),
        (at.app.as_str(), "u", "x\0y"),
        (at.app.as_str(), "u", &"x".repeat(129)),
    ] {
        let bad = Loc::new(app, user, session);
        let context = format!("ids {app:?}/{user:?}/{session:?}");
        expect_code(
            svc.save(bad.save_req("f", text("x"), None)).await,
            Code::InvalidArgument,
            &context,
        );
        expect_code(
            svc.load(bad.load_req("keep.txt", None)).await,
            Code::InvalidArgument,
            &context,
        );
        expect_code(svc.list(bad.list_req()).await, Code::InvalidArgument, &context);
        expect_code(
            svc.delete(bad.delete_req("keep.txt", None)).await,
            Code::InvalidArgument,
            &context,
        );
    }

    let err = expect_code(
        svc.upload(at.upload_req("keep.txt", ""), pieces(b"x", 1)).await,
        Code::InvalidArgument,
        "upload without a MIME type",
    );
    assert!(err.to_string().contains("mime_type"), "{err}");
    let no_mime = at.save_req("keep.txt", Part::inline_data("", b"x".to_vec()), None);
    expect_code(
        svc.save(no_mime).await,
        Code::InvalidArgument,
        "inline data without a MIME type",
    );
    let mut bad_custom = at.upload_req("keep.txt", "x/y");
    bad_custom.custom_metadata.insert(String::new(), json!(1));
    let upload = svc.upload(bad_custom, pieces(b"x", 1)).await;
    expect_code(upload, Code::InvalidArgument, "custom metadata with an empty key");

    let function_call = Part::function_call("f", json!({}), None);
    let other_app = format!("artifact://apps/{}x/users/u/artifacts/user:keep.txt/versions/1", at.app);
    for part in [
        function_call,
        Part::file_data("", ""),
        Part::file_data("", other_app),
        Part::file_data("", "artifact://apps/oops"),
    ] {
        let err = expect_code(
            svc.save(at.save_req("keep.txt", part.clone(), None)).await,
            Code::InvalidArgument,
            &format!("save of {part:?}"),
        );
        assert!(err.to_string().contains("part"), "{err}");
    }

    for v in [0, -1, i64::MIN] {
        let context = |op: &str| format!("{op} with version {v}");
        let err = expect_code(
            svc.save(at.save_req("keep.txt", text("x"), Some(v))).await,
            Code::InvalidArgument,
            &context("save"),
        );
        assert!(err.to_string().contains("version"), "{err}");
        let mut upload = at.upload_req("keep.txt", "x/y");
        upload.version = Some(v);
        expect_code(
            svc.upload(upload, pieces(b"x", 1)).await,
            Code::InvalidArgument,
            &context("upload"),
        );
        expect_code(
            svc.load(at.load_req("keep.txt", Some(v))).await,
            Code::InvalidArgument,
            &context("load"),
        );
        let metadata = svc.metadata(at.load_req("keep.txt", Some(v))).await;
        expect_code(metadata, Code::InvalidArgument, &context("metadata"));
        let download = svc.download(at.load_req("keep.txt", Some(v)), 0).await.map(|_| ());
        expect_code(download, Code::InvalidArgument, &context("download"));
        let deleted = svc.delete(at.delete_req("keep.txt", Some(v))).await;
        expect_code(deleted, Code::InvalidArgument, &context("delete"));
    }

    assert_eq!(snapshot(svc, &at).await, before, "rejected requests changed nothing");
}

async fn create_session(sessions: &dyn SessionService, at: &Loc) {
    sessions
        .create(CreateRequest {
            app_name: at.app.clone(),
            user_id: at.user.clone(),
            session_id: Some(at.session.clone()),
            ..Default::default()
        })
        .await
        .unwrap_or_else(|e| panic!("create session {}/{}/{}: {e}", at.app, at.user, at.session));
}

async fn delete_session(sessions: &dyn SessionService, at: &Loc) {
    let req = adk_grpc_core::DeleteRequest {
        app_name: at.app.clone(),
        user_id: at.user.clone(),
        session_id: at.session.clone(),
    };
    sessions
        .delete(req)
        .await
        .unwrap_or_else(|e| panic!("delete session {}/{}/{}: {e}", at.app, at.user, at.session));
}

pub async fn deleting_a_session_deletes_its_artifacts(
    sessions: &dyn SessionService,
    artifacts: &dyn ArtifactService,
    limits: ArtifactLimits,
) {
    let svc = artifacts;
    let app = unique_prefix("art-session-delete");
    let at = Loc::new(&app, "u", "s");
    let sibling = Loc::new(&app, "u", "s2");
    let other_user = Loc::new(&app, "v", "s");
    for loc in [&at, &sibling, &other_user] {
        create_session(sessions, loc).await;
    }
    // Several versions, a name with awkward characters, a body of several storage chunks.
    save(svc, &at, "notes.txt", text("one")).await;
    save(svc, &at, "notes.txt", text("two")).await;
    let big = noise(limits.chunk_bytes * 5 / 2, 11);
    svc.upload(at.upload_req("dir/a:{b}.bin", "x/y"), pieces(&big, 10_000))
        .await
        .expect("multi-chunk upload");
    save(svc, &at, "user:profile.txt", text("the user's")).await;
    save(svc, &sibling, "notes.txt", text("sibling")).await;
    save(svc, &other_user, "notes.txt", text("other user")).await;
    let sibling_before = snapshot(svc, &sibling).await;
    let other_before = snapshot(svc, &other_user).await;

    delete_session(sessions, &at).await;
    assert_eq!(
        list(svc, &at).await,
        ["user:profile.txt"],
        "the session's own names are gone, the user's stay"
    );
    for (name, version) in [("notes.txt", None), ("notes.txt", Some(1)), ("dir/a:{b}.bin", Some(1))] {
        let context = format!("{name} version {version:?} after DeleteSession");
        expect_code(svc.load(at.load_req(name, version)).await, Code::NotFound, &context);
        expect_code(svc.metadata(at.load_req(name, version)).await, Code::NotFound, &context);
        assert_eq!(versions(svc, &at, name).await, Vec::<i64>::new(), "{context}");
    }
    assert_eq!(load(svc, &at, "user:profile.txt", None).await, text("the user's"));
    assert_eq!(
        snapshot(svc, &sibling).await,
        sibling_before,
        "another session of the user"
    );
    assert_eq!(
        snapshot(svc, &other_user).await,
        other_before,
        "another user's session of that id"
    );

    // Re-created under the same id, the session starts with no artifacts: numbering restarts at 1.
    create_session(sessions, &at).await;
    assert_eq!(list(svc, &at).await, ["user:profile.txt"], "the re-created session");
    assert_eq!(
        save(svc, &at, "notes.txt", text("new")).await,
        1,
        "versions restart at 1"
    );
    assert_eq!(versions(svc, &at, "notes.txt").await, [1]);
    assert_eq!(load(svc, &at, "notes.txt", Some(1)).await, text("new"));
    expect_code(
        svc.load(at.load_req("dir/a:{b}.bin", Some(1))).await,
        Code::NotFound,
        "an old name in the re-created session",
    );

    // A session without artifacts, and one that does not exist, delete as before.
    delete_session(sessions, &sibling).await;
    delete_session(sessions, &sibling).await;
    delete_session(sessions, &Loc::new(&app, "u", "never-created")).await;
    assert_eq!(list(svc, &sibling).await, ["user:profile.txt"]);
}

// ---------- sessions optional, references, hostile ids ----------

pub async fn user_names_need_no_session(svc: &dyn ArtifactService, _: ArtifactLimits) {
    let app = unique_prefix("art-nosession");
    let none = Loc::new(&app, "u", "");
    let session = Loc::new(&app, "u", "s");
    assert_eq!(save(svc, &none, "user:profile", text("p1")).await, 1);
    assert_eq!(save(svc, &session, "user:profile", text("p2")).await, 2);
    save(svc, &session, "notes", text("n")).await;
    // Every RPC takes a user: name without a session, and sees the same versions.
    assert_eq!(load(svc, &none, "user:profile", None).await, text("p2"));
    assert_eq!(load(svc, &none, "user:profile", Some(1)).await, text("p1"));
    assert_eq!(versions(svc, &none, "user:profile").await, [2, 1]);
    let metadata = svc
        .metadata(none.load_req("user:profile", None))
        .await
        .expect("metadata");
    assert_eq!(metadata.version, 2);
    let (_, bytes, _) = download(svc, none.load_req("user:profile", Some(1)), 0)
        .await
        .expect("download");
    assert_eq!(bytes, b"p1");
    let upload = svc
        .upload(none.upload_req("user:upload.bin", "x/y"), pieces(b"up", 1))
        .await;
    assert_eq!(upload.expect("upload without a session").version, 1);
    // Listing without a session: the user's names only; with one, the session's as well.
    assert_eq!(list(svc, &none).await, ["user:profile", "user:upload.bin"]);
    assert_eq!(list(svc, &session).await, ["notes", "user:profile", "user:upload.bin"]);
    delete(svc, &none, "user:upload.bin", None).await;
    assert_absent(svc, &session, "user:upload.bin", "deleted without a session").await;

    // A session-scoped name needs its session, on every RPC; nothing changes.
    let before = snapshot(svc, &session).await;
    let needs_session = |result: Result<(), AdkError>, op: &str| {
        let err = expect_code(
            result,
            Code::InvalidArgument,
            &format!("{op} of a session name without a session"),
        );
        assert!(err.to_string().starts_with("session_id "), "{op}: {err}");
    };
    needs_session(
        svc.save(none.save_req("notes", text("x"), None)).await.map(drop),
        "save",
    );
    let upload = svc.upload(none.upload_req("notes", "x/y"), pieces(b"x", 1)).await;
    needs_session(upload.map(drop), "upload");
    needs_session(svc.load(none.load_req("notes", None)).await.map(drop), "load");
    needs_session(svc.metadata(none.load_req("notes", None)).await.map(drop), "metadata");
    needs_session(
        svc.download(none.load_req("notes", None), 0).await.map(drop),
        "download",
    );
    needs_session(svc.versions(none.versions_req("notes")).await.map(drop), "versions");
    needs_session(svc.delete(none.delete_req("notes", None)).await, "delete");
    assert_eq!(
        snapshot(svc, &session).await,
        before,
        "refused requests changed nothing"
    );
}

/// ADK's URI of a version (this service's numbering).
fn artifact_uri(at: &Loc, name: &str, version: i64) -> String {
    match at.session.as_str() {
        "" => format!(
            "artifact://apps/{}/users/{}/artifacts/{name}/versions/{version}",
            at.app, at.user
        ),
        session => format!(
            "artifact://apps/{}/users/{}/sessions/{session}/artifacts/{name}/versions/{version}",
            at.app, at.user
        ),
    }
}

fn reference(uri: String) -> Part {
    Part::file_data("", uri)
}

pub async fn file_uris_load_back_and_references_resolve(svc: &dyn ArtifactService, _: ArtifactLimits) {
    // Ids with the URI's own separators still resolve: they are compared, not re-encoded.
    let at = Loc::new(&unique_prefix("art-refs"), "auth0|42", "s:1");
    let user = Loc::new(&at.app, &at.user, "");
    save(svc, &at, "data.bin", Part::inline_data("image/png", vec![1, 2, 3])).await;
    save(svc, &at, "data.bin", Part::inline_data("image/png", vec![4, 5])).await;
    save(svc, &user, "user:shared.txt", text("shared")).await;

    // A reference is stored as such, and loads (and downloads) as the version it names.
    let first = artifact_uri(&at, "data.bin", 1);
    assert_eq!(save(svc, &at, "ref", reference(first.clone())).await, 1);
    let loaded = svc.load(at.load_req("ref", None)).await.expect("load a reference");
    assert_eq!(loaded.part, Part::inline_data("image/png", vec![1, 2, 3]));
    assert_eq!(
        (loaded.metadata.file_name.as_str(), loaded.metadata.version),
        ("data.bin", 1)
    );
    let (metadata, chunks) = svc
        .download_resolved(at.load_req("ref", Some(1)), 0)
        .await
        .expect("download");
    let bytes: Vec<u8> = chunks.try_concat().await.expect("the bytes");
    assert_eq!(
        (metadata.file_name.as_str(), bytes.as_slice()),
        ("data.bin", &[1u8, 2, 3][..])
    );
    let own = svc
        .metadata(at.load_req("ref", None))
        .await
        .expect("metadata of the reference itself");
    assert!(own.is_file_uri && own.file_name == "ref", "{own:?}");
    assert_eq!(own.size_bytes, first.len() as u64);

    // A user-scoped reference resolves from any of the user's sessions, and without one.
    let to_user = artifact_uri(&user, "user:shared.txt", 1);
    save(svc, &at, "user:ref", reference(to_user)).await;
    for from in [&at, &user, &Loc::new(&at.app, &at.user, "other")] {
        assert_eq!(load(svc, from, "user:ref", None).await, text("shared"));
    }
    // References to references resolve too; a deleted target is NOT_FOUND.
    save(svc, &at, "ref-to-ref", reference(artifact_uri(&at, "ref", 1))).await;
    assert_eq!(
        load(svc, &at, "ref-to-ref", None).await,
        Part::inline_data("image/png", vec![1, 2, 3])
    );
    delete(svc, &at, "data.bin", Some(1)).await;
    expect_code(
        svc.load(at.load_req("ref-to-ref", None)).await,
        Code::NotFound,
        "dangling",
    );
    let dangling = svc.download_resolved(at.load_req("ref", None), 0).await.map(drop);
    expect_code(dangling, Code::NotFound, "dangling download");
    // A reference may name a version that does not exist yet, as in ADK.
    save(svc, &at, "later", reference(artifact_uri(&at, "data.bin", 3))).await;
    expect_code(svc.load(at.load_req("later", None)).await, Code::NotFound, "not yet");
    save(svc, &at, "data.bin", text("third")).await;
    assert_eq!(load(svc, &at, "later", None).await, text("third"));
}

pub async fn references_stay_in_their_scope(svc: &dyn ArtifactService, _: ArtifactLimits) {
    let app = unique_prefix("art-refscope");
    let at = Loc::new(&app, "u", "s");
    save(svc, &at, "data.txt", text("mine")).await;
    save(svc, &at, "user:data.txt", text("user's")).await;
    let before = snapshot(svc, &at).await;
    let refused = [
        // Another app, another user, another session, or a session name from no session.
        (
            at.clone(),
            artifact_uri(&Loc::new(&format!("{app}x"), "u", "s"), "data.txt", 1),
        ),
        (at.clone(), artifact_uri(&Loc::new(&app, "v", "s"), "data.txt", 1)),
        (at.clone(), artifact_uri(&Loc::new(&app, "v", ""), "user:data.txt", 1)),
        (at.clone(), artifact_uri(&Loc::new(&app, "u", "t"), "data.txt", 1)),
        (Loc::new(&app, "u", ""), artifact_uri(&at, "data.txt", 1)),
        // No valid target.
        (at.clone(), artifact_uri(&Loc::new(&app, "u", ""), "data.txt", 1)),
        (at.clone(), artifact_uri(&at, "data.txt", 0)),
        (at.clone(), artifact_uri(&at, "../data.txt", 1)),
        (at.clone(), format!("artifact://apps/{app}/users/u/files/data.txt")),
    ];
    for (from, uri) in refused {
        let result = svc.save(from.save_req("user:ref", reference(uri.clone()), None)).await;
        let err = expect_code(result, Code::InvalidArgument, &uri);
        assert!(err.to_string().starts_with("part.file_data.file_uri "), "{uri}: {err}");
    }
    assert_eq!(snapshot(svc, &at).await, before, "refused references stored nothing");

    // A user: reference to a session's artifact resolves only from that session (ADK's rule).
    save(svc, &at, "user:to-session", reference(artifact_uri(&at, "data.txt", 1))).await;
    assert_eq!(load(svc, &at, "user:to-session", None).await, text("mine"));
    for from in [Loc::new(&app, "u", "t"), Loc::new(&app, "u", "")] {
        let err = expect_code(
            svc.load(from.load_req("user:to-session", None)).await,
            Code::InvalidArgument,
            "a session reference loaded from elsewhere",
        );
        assert!(err.to_string().contains("same session"), "{err}");
    }
}

pub async fn reference_chains_are_bounded(svc: &dyn ArtifactService, _: ArtifactLimits) {
    let at = Loc::new(&unique_prefix("art-chain"), "u", "s");
    save(svc, &at, "data", text("end")).await;
    // link5 -> link4 -> ... -> link1 -> data: five references, ADK's limit.
    let mut previous = "data".to_string();
    for i in 1..=6 {
        let name = format!("link{i}");
        save(svc, &at, &name, reference(artifact_uri(&at, &previous, 1))).await;
        previous = name;
    }
    assert_eq!(load(svc, &at, "link5", None).await, text("end"));
    let err = expect_code(
        svc.load(at.load_req("link6", None)).await,
        Code::FailedPrecondition,
        "six references",
    );
    assert!(err.to_string().contains("more than 5 references"), "{err}");
    // A cycle ends the same way instead of looping.
    save(svc, &at, "self", reference(artifact_uri(&at, "self", 1))).await;
    expect_code(
        svc.load(at.load_req("self", None)).await,
        Code::FailedPrecondition,
        "a cycle",
    );
}

pub async fn hostile_ids_keep_artifacts_apart(svc: &dyn ArtifactService, _: ArtifactLimits) {
    let base = unique_prefix("art-hostile");
    // Neighbours would share keys (or a hash tag) if ids went into keys as they are.
    let places = [
        (Loc::new(&format!("{base}:x"), "y", "s"), "f"),
        (Loc::new(&base, "x:y", "s"), "f"),
        (Loc::new(&base, "u", "s:1"), "x"),
        (Loc::new(&base, "u", "s"), "1:x"),
        (Loc::new(&base, "u", "~user"), "f"),
        (Loc::new(&base, "u", ""), "user:f"),
        (Loc::new(&base, "{u}", "}{"), "f"),
        (Loc::new(&base, "%7Bu%7D", "%7D%7B"), "f"),
        (Loc::new(&base, "*", "* ?[]"), "f"),
        (Loc::new(&base, "ü ser 😀", " s "), "f"),
        (Loc::new(&base, "group/user123", "s/../t"), "f"),
    ];
    for (i, (at, name)) in places.iter().enumerate() {
        assert_eq!(save(svc, at, name, text(&format!("place {i}"))).await, 1, "place {i}");
    }
    for (i, (at, name)) in places.iter().enumerate() {
        assert_eq!(
            load(svc, at, name, None).await,
            text(&format!("place {i}")),
            "place {i}"
        );
        assert_eq!(versions(svc, at, name).await, [1], "place {i}");
    }
    assert_eq!(list(svc, &places[2].0).await, ["user:f", "x"]);
    assert_eq!(list(svc, &places[3].0).await, ["1:x", "user:f"]);
    assert_eq!(list(svc, &places[4].0).await, ["f", "user:f"]);
    assert_eq!(list(svc, &places[5].0).await, ["user:f"]);
    assert_eq!(list(svc, &places[0].0).await, ["f"]);
    assert_eq!(list(svc, &places[1].0).await, ["f"]);
    // Deleting one place's artifact leaves its neighbour's.
    delete(svc, &places[1].0, "f", None).await;
    assert_eq!(load(svc, &places[0].0, "f", None).await, text("place 0"));
    delete(svc, &places[6].0, "f", None).await;
    assert_eq!(load(svc, &places[7].0, "f", None).await, text("place 7"));
}

/// Versions run from 1 to 2^53 - 1 (exact in Redis's Lua): the highest ones are stored and
/// listed exactly; past the last one a save is `RESOURCE_EXHAUSTED`, and an explicit
/// version above it `INVALID_ARGUMENT`, storing nothing.
pub async fn versions_end_at_the_maximum(svc: &dyn ArtifactService, _: ArtifactLimits) {
    let at = Loc::new(&unique_prefix("art-max"), "u", "s");
    let saved = svc.save(at.save_req("f", text("x"), Some(MAX_VERSION - 1))).await;
    assert_eq!(saved.expect("the second highest version").version, MAX_VERSION - 1);
    assert_eq!(save(svc, &at, "f", text("y")).await, MAX_VERSION);
    let err = expect_code(
        svc.save(at.save_req("f", text("z"), None)).await,
        Code::ResourceExhausted,
        "no version left",
    );
    assert!(err.to_string().contains("no version number left"), "{err}");
    let err = expect_code(
        svc.save(at.save_req("g", text("z"), Some(MAX_VERSION + 1))).await,
        Code::InvalidArgument,
        "a version above the maximum",
    );
    assert!(err.to_string().starts_with("version must be at most"), "{err}");
    assert_eq!(versions(svc, &at, "f").await, [MAX_VERSION, MAX_VERSION - 1]);
    assert_absent(svc, &at, "g", "a refused version stores nothing").await;
}

/// NOT_FOUND and ALREADY_EXISTS read the same whatever stores the artifacts.
pub async fn errors_are_worded_alike(svc: &dyn ArtifactService, _: ArtifactLimits) {
    let at = Loc::new(&unique_prefix("art-words"), "u", "s");
    save(svc, &at, "f.txt", text("x")).await;
    let missing = expect_code(svc.load(at.load_req("none.txt", None)).await, Code::NotFound, "name");
    assert_eq!(missing.to_string(), r#"artifact "none.txt" not found"#);
    let missing = expect_code(
        svc.metadata(at.load_req("f.txt", Some(7))).await,
        Code::NotFound,
        "version",
    );
    assert_eq!(missing.to_string(), r#"artifact "f.txt" has no version 7"#);
    let taken = expect_code(
        svc.save(at.save_req("f.txt", text("y"), Some(1))).await,
        Code::AlreadyExists,
        "taken",
    );
    assert_eq!(
        taken.to_string(),
        r#"artifact "f.txt" version 1 already exists; versions are immutable"#
    );
}
