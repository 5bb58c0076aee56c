//! Artifact backends, in memory ([`memory`]) and in Redis ([`redis`]), and the
//! rules they share: where a name lives (session or user scope), which chunk
//! sizes are used, how an upload's bytes are counted, checked and cut into
//! storage chunks, and the errors every backend reports the same way.
//!
//! Versions are whole numbers from 1 to [`MAX_VERSION`]; the next version of a
//! name is one more than the highest it ever had, so a deleted latest version's
//! number is not handed out again while the name has other versions (after all
//! of them are deleted, numbering starts at 1 again).

pub mod memory;
pub mod redis;

use crate::StoreConfig;
use adk_core::artifact::{
    ByteStream, DEFAULT_CHUNK_BYTES, MAX_CHUNK_BYTES, UploadRequest, body_of_declared_size, is_user_scoped,
};
use adk_core::{AdkError, Existing, Missing, Result};
use futures::StreamExt;

/// The highest version a backend stores: 2^53 - 1, so that versions stay exact
/// in Redis's Lua, whose numbers are doubles. Applies to every backend alike.
pub const MAX_VERSION: i64 = (1 << 53) - 1;

/// The size limit and storage chunk size of a backend, from its [`StoreConfig`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub max_bytes: u64,
    pub chunk_bytes: usize,
}

impl Limits {
    pub fn of(config: &StoreConfig) -> Limits {
        Limits {
            max_bytes: config.max_artifact_bytes,
            chunk_bytes: chunk_size(config.artifact_chunk_bytes),
        }
    }
}

/// A requested chunk size as used: 0 means the default, and anything above
/// [`MAX_CHUNK_BYTES`] (the most that fits a gRPC message comfortably) is capped.
pub(crate) fn chunk_size(requested: usize) -> usize {
    match requested {
        0 => DEFAULT_CHUNK_BYTES,
        n => n.min(MAX_CHUNK_BYTES),
    }
}

/// The session a name belongs to, or None for a `user:` name (the user's scope).
pub(crate) fn session_scope<'a>(session_id: &'a str, file_name: &str) -> Option<&'a str> {
    (!is_user_scoped(file_name)).then_some(session_id)
}

/// The names a session sees: its own and its user's, sorted, each once.
pub(crate) fn visible_names(session: Vec<String>, user: Vec<String>) -> Vec<String> {
    let mut names = session;
    names.extend(user);
    names.sort_unstable();
    names.dedup();
    names
}

/// The version after `last`, the highest a name ever had.
pub(crate) fn next_version(file_name: &str, last: i64) -> Result<i64> {
    if last >= MAX_VERSION {
        return Err(no_version_left(file_name));
    }
    Ok(last + 1)
}

pub(crate) fn no_version_left(file_name: &str) -> AdkError {
    AdkError::limit(
        "max_artifact_version",
        MAX_VERSION,
        format!("artifact {file_name:?} has no version number left after {MAX_VERSION}"),
    )
}

pub(crate) fn not_found(file_name: &str, version: Option<i64>) -> AdkError {
    match version {
        Some(v) => AdkError::NotFound(Missing::Artifact, format!("artifact {file_name:?} has no version {v}")),
        None => AdkError::NotFound(Missing::Artifact, format!("artifact {file_name:?} not found")),
    }
}

pub(crate) fn version_exists(file_name: &str, version: i64) -> AdkError {
    AdkError::AlreadyExists(
        Existing::ArtifactVersion,
        format!("artifact {file_name:?} version {version} already exists; versions are immutable"),
    )
}

fn too_large(max_bytes: u64) -> AdkError {
    AdkError::limit(
        "max_artifact_bytes",
        max_bytes,
        format!("artifact exceeds the maximum size of {max_bytes} bytes (--max-artifact-bytes)"),
    )
}

/// An upload's body as storage chunks: every chunk `chunk_bytes` long except a
/// shorter last one, however the client cut its stream. Holds at most one chunk
/// plus the unread rest of the last incoming piece. Fails as soon as the body
/// passes the size limit, and (for text) when it is not UTF-8.
pub(crate) struct ChunkedUpload {
    body: ByteStream,
    limits: Limits,
    /// Set for text uploads.
    utf8: Option<Utf8Check>,
    /// The last incoming piece and how much of it is used.
    piece: Vec<u8>,
    used: usize,
    received: u64,
    ended: bool,
}

impl ChunkedUpload {
    /// Validates the request and refuses an oversized upload from its declared size, before
    /// reading any byte; the body must then have exactly the declared size.
    pub fn new(req: &UploadRequest, body: ByteStream, limits: Limits) -> Result<ChunkedUpload> {
        req.validate()?;
        if let Some(v) = req.version.filter(|v| *v > MAX_VERSION) {
            return Err(AdkError::invalid(
                "version",
                format!("must be at most {MAX_VERSION}, got {v}"),
            ));
        }
        if req.size_hint.is_some_and(|size| size > limits.max_bytes) {
            return Err(too_large(limits.max_bytes));
        }
        Ok(ChunkedUpload {
            body: body_of_declared_size(body, req.size_hint),
            limits,
            utf8: req.is_text.then(Utf8Check::default),
            piece: Vec::new(),
            used: 0,
            received: 0,
            ended: false,
        })
    }

    /// Bytes received so far; after the last chunk, the artifact's size.
    pub fn size(&self) -> u64 {
        self.received
    }

    /// The next storage chunk; None once the body has ended (and passed every check).
    pub async fn next_chunk(&mut self) -> Result<Option<Vec<u8>>> {
        let mut chunk = Vec::new();
        while chunk.len() < self.limits.chunk_bytes {
            if self.used == self.piece.len() {
                if !self.read_piece().await? {
                    break;
                }
                continue;
            }
            let take = (self.limits.chunk_bytes - chunk.len()).min(self.piece.len() - self.used);
            if chunk.is_empty() && self.used == 0 && take == self.piece.len() {
                // A whole piece becomes the chunk's start without a copy.
                chunk = std::mem::take(&mut self.piece);
            } else {
                chunk.extend_from_slice(&self.piece[self.used..self.used + take]);
                self.used += take;
            }
        }
        Ok((!chunk.is_empty()).then_some(chunk))
    }

    /// Reads the next incoming piece into `piece`; false at the end of the body.
    async fn read_piece(&mut self) -> Result<bool> {
        if self.ended {
            return Ok(false);
        }
        let Some(piece) = self.body.next().await.transpose()? else {
            self.ended = true;
            if self.utf8.as_ref().is_some_and(|check| !check.finish()) {
                return Err(not_utf8());
            }
            return Ok(false);
        };
        self.received += piece.len() as u64;
        if self.received > self.limits.max_bytes {
            return Err(too_large(self.limits.max_bytes));
        }
        if self.utf8.as_mut().is_some_and(|check| !check.feed(&piece)) {
            return Err(not_utf8());
        }
        self.piece = piece;
        self.used = 0;
        Ok(true)
    }
}

fn not_utf8() -> AdkError {
    AdkError::invalid_with("chunk", "artifact marked as text is not valid UTF-8")
}

/// Checks that bytes arriving in pieces are UTF-8, without joining the pieces:
/// only a character cut by a piece boundary (at most 3 bytes) is carried over.
#[derive(Default)]
struct Utf8Check {
    /// The start of a character the last piece cut off.
    carry: Vec<u8>,
}

impl Utf8Check {
    /// False once the bytes so far cannot be UTF-8.
    fn feed(&mut self, piece: &[u8]) -> bool {
        let mut rest = piece;
        // Complete the carried character byte by byte (it needs at most 3 more).
        while !self.carry.is_empty() {
            let Some((&byte, tail)) = rest.split_first() else {
                return true;
            };
            self.carry.push(byte);
            rest = tail;
            match std::str::from_utf8(&self.carry) {
                Ok(_) => self.carry.clear(),
                Err(e) if e.error_len().is_none() => {}
                Err(_) => return false,
            }
        }
        match std::str::from_utf8(rest) {
            Ok(_) => true,
            // Only incomplete at the end: the rest may come with the next piece.
            Err(e) if e.error_len().is_none() => {
                self.carry = rest[e.valid_up_to()..].to_vec();
                true
            }
            Err(_) => false,
        }
    }

    /// True when the bytes fed so far are complete UTF-8.
    fn finish(&self) -> bool {
        self.carry.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::stream;

    fn upload_of(pieces: Vec<Vec<u8>>, is_text: bool, limits: Limits) -> Result<ChunkedUpload> {
        let req = UploadRequest {
            app_name: "a".into(),
            user_id: "u".into(),
            session_id: "s".into(),
            file_name: "f".into(),
            mime_type: "text/plain".into(),
            is_text,
            ..Default::default()
        };
        ChunkedUpload::new(&req, stream::iter(pieces.into_iter().map(Ok)).boxed(), limits)
    }

    async fn chunks_of(pieces: Vec<Vec<u8>>, is_text: bool, limits: Limits) -> Result<Vec<Vec<u8>>> {
        let mut upload = upload_of(pieces, is_text, limits)?;
        let mut chunks = Vec::new();
        while let Some(chunk) = upload.next_chunk().await? {
            chunks.push(chunk);
        }
        Ok(chunks)
    }

    const LIMITS: Limits = Limits {
        max_bytes: 100,
        chunk_bytes: 4,
    };

    #[tokio::test]
    async fn pieces_are_recut_into_storage_chunks() {
        let pieces = vec![
            b"a".to_vec(),
            b"bcdef".to_vec(),
            vec![],
            b"ghij".to_vec(),
            b"k".to_vec(),
        ];
        let chunks = chunks_of(pieces, false, LIMITS).await.unwrap();
        assert_eq!(chunks, [b"abcd".to_vec(), b"efgh".to_vec(), b"ijk".to_vec()]);
        assert!(chunks_of(vec![], false, LIMITS).await.unwrap().is_empty());
        let exact = chunks_of(vec![b"abcd".to_vec(), b"efgh".to_vec()], false, LIMITS)
            .await
            .unwrap();
        assert_eq!(exact, [b"abcd".to_vec(), b"efgh".to_vec()]);
    }

    #[tokio::test]
    async fn the_size_limit_holds_for_hints_and_bodies() {
        let limits = Limits {
            max_bytes: 5,
            chunk_bytes: 4,
        };
        assert!(chunks_of(vec![b"abcde".to_vec()], false, limits).await.is_ok());
        let err = chunks_of(vec![b"abc".to_vec(), b"def".to_vec()], false, limits)
            .await
            .unwrap_err();
        assert!(matches!(err, AdkError::ResourceExhausted(..)), "{err:?}");
        assert!(err.to_string().contains("maximum size of 5 bytes"), "{err}");
        let req = UploadRequest {
            app_name: "a".into(),
            user_id: "u".into(),
            session_id: "s".into(),
            file_name: "f".into(),
            mime_type: "x/y".into(),
            size_hint: Some(6),
            ..Default::default()
        };
        let never = stream::pending().boxed();
        let err = ChunkedUpload::new(&req, never, limits).err().expect("refused at once");
        assert!(matches!(err, AdkError::ResourceExhausted(..)), "{err:?}");
    }

    #[tokio::test]
    async fn text_must_be_utf8_across_piece_boundaries() {
        let text = "añ€😀z".as_bytes();
        for cut in 0..text.len() {
            let pieces = vec![text[..cut].to_vec(), text[cut..].to_vec()];
            let chunks = chunks_of(pieces, true, LIMITS).await.unwrap();
            assert_eq!(chunks.concat(), text, "cut at {cut}");
        }
        for bad in [
            vec![vec![0xff]],
            vec![b"a".to_vec(), vec![0xe2, 0x82]],
            vec![vec![0xe2], vec![0x41]],
        ] {
            let err = chunks_of(bad.clone(), true, LIMITS).await.unwrap_err();
            assert!(matches!(err, AdkError::InvalidArgument { .. }), "{bad:?}: {err:?}");
            assert!(chunks_of(bad, false, LIMITS).await.is_ok(), "binary needs no UTF-8");
        }
    }

    #[test]
    fn chunk_sizes_and_names() {
        assert_eq!(chunk_size(0), DEFAULT_CHUNK_BYTES);
        assert_eq!(chunk_size(10), 10);
        assert_eq!(chunk_size(usize::MAX), MAX_CHUNK_BYTES);
        assert_eq!(session_scope("s", "user:x"), None);
        assert_eq!(session_scope("s", "x"), Some("s"));
        assert_eq!(
            visible_names(vec!["b".into(), "a".into()], vec!["user:a".into()]),
            ["a", "b", "user:a"]
        );
        assert_eq!(next_version("f", 0).unwrap(), 1);
        assert!(next_version("f", MAX_VERSION).is_err());
    }
}
