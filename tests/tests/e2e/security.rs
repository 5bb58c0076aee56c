//! TLS, mutual TLS, authentication and authorization end to end: the real
//! `adk-server` binary (sessions, artifacts and the runner in one process),
//! certificates made here with rcgen, API keys and JWTs (HS256, RS256 from a
//! JWKS, ES256) made here too, real gRPC clients. Plus Redis AUTH / ACL users
//! through the store URL.

use adk_grpc_client::{ConnectOptions, RemoteArtifactService, RemoteSessionService};
use adk_grpc_core::artifact::UploadRequest;
use adk_grpc_core::{ArtifactService, ByteStream, CreateRequest, GetRequest, SessionService};
use adk_grpc_e2e::cases::{check, on, row};
use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::agent_runner_client::AgentRunnerClient;
use adk_grpc_proto::v1::artifact_service_client::ArtifactServiceClient;
use adk_grpc_proto::v1::session_service_client::SessionServiceClient;
use adk_grpc_testkit::{RedisCluster, RedisServer, ServiceProcess, workspace_bin};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use futures::StreamExt;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose};
use serde_json::json;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tempfile::TempDir;
use tonic::Code;
use tonic::metadata::MetadataValue;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

const APP: &str = "helper";
const ALICE_KEY: &str = "alice-key-0123456789abcdef";
const ADMIN_KEY: &str = "admin-key-0123456789abcdef";
const HS256_SECRET: &str = "an-hs256-secret-of-at-least-32-bytes!";
const AUDIENCE: &str = "adk-tests";
const ISSUER: &str = "https://issuer.example";

/// The runner's app: the mock model echoes, no provider key needed.
const AGENTS: &str = "
models:
  echo: { provider: mock }
apps:
  helper:
    root_agent:
      name: helper
      model: echo
      instruction: You help.
      # An agent writes app state (shared by every user) whoever runs it.
      output_key: app:last_reply
";

// ---------------------------------------------------------------- fixtures

/// A CA, a server certificate for 127.0.0.1/localhost and a client certificate,
/// all signed by the CA, written to a temp dir.
struct Pki {
    dir: TempDir,
    ca_pem: String,
    client_cert_pem: String,
    client_key_pem: String,
}

fn ca() -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, "adk test CA");
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
    CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
}

/// (certificate PEM, key PEM) for `names`, signed by `ca`.
fn leaf(ca: &CertifiedIssuer<'static, KeyPair>, names: &[&str]) -> (String, String) {
    let key = KeyPair::generate().unwrap();
    let names: Vec<String> = names.iter().map(|name| name.to_string()).collect();
    let mut params = CertificateParams::new(names).unwrap();
    params.distinguished_name.push(DnType::CommonName, "adk test");
    let cert = params.signed_by(&key, ca).unwrap();
    (cert.pem(), key.serialize_pem())
}

impl Pki {
    fn new() -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let ca = ca();
        let (server_cert, server_key) = leaf(&ca, &["localhost", "127.0.0.1"]);
        let (client_cert_pem, client_key_pem) = leaf(&ca, &["client.example"]);
        std::fs::write(dir.path().join("ca.pem"), ca.pem()).unwrap();
        std::fs::write(dir.path().join("server.pem"), server_cert).unwrap();
        std::fs::write(dir.path().join("server.key"), server_key).unwrap();
        Pki {
            dir,
            ca_pem: ca.pem(),
            client_cert_pem,
            client_key_pem,
        }
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    fn server_args(&self) -> Vec<String> {
        vec![
            "--tls-cert".into(),
            self.path("server.pem"),
            "--tls-key".into(),
            self.path("server.key"),
        ]
    }
}

fn sha256_hex(key: &str) -> String {
    Sha256::digest(key.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Credentials files: API keys (alice: only `helper`; an admin of every app), the
/// HS256 secret, and a JWKS with an RSA key (`rsa-1`) and a P-256 key (`ec-1`).
struct Credentials {
    dir: TempDir,
    rsa_private_pem: Vec<u8>,
    ec_private_pem: Vec<u8>,
}

impl Credentials {
    fn new() -> Credentials {
        let dir = tempfile::tempdir().unwrap();
        let keys = format!(
            "# test keys\n{}\n{}\n",
            json!({"sha256": sha256_hex(ALICE_KEY), "apps": [APP], "user": "alice", "name": "alice's laptop"}),
            json!({"sha256": sha256_hex(ADMIN_KEY), "apps": ["*"], "role": "admin"}),
        );
        std::fs::write(dir.path().join("keys.jsonl"), keys).unwrap();
        std::fs::write(dir.path().join("hs256.secret"), format!("{HS256_SECRET}\n")).unwrap();

        // RSA: ring cannot generate RSA keys, the openssl CLI can.
        let rsa_path = dir.path().join("rsa.pem");
        openssl(&["genrsa", "-out", &rsa_path.display().to_string(), "2048"]);
        let modulus = openssl(&["rsa", "-in", &rsa_path.display().to_string(), "-noout", "-modulus"]);
        let modulus = modulus
            .trim()
            .strip_prefix("Modulus=")
            .expect("openssl prints Modulus=HEX");
        let modulus: Vec<u8> = (0..modulus.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&modulus[i..i + 2], 16).unwrap())
            .collect();
        let ec = KeyPair::generate().unwrap();
        let point = ec.public_key_raw();
        assert_eq!((point.len(), point[0]), (65, 4), "an uncompressed P-256 point");
        let jwks = json!({"keys": [
            {"kty": "RSA", "kid": "rsa-1", "alg": "RS256", "use": "sig",
             "n": URL_SAFE_NO_PAD.encode(&modulus), "e": "AQAB"},
            {"kty": "EC", "kid": "ec-1", "alg": "ES256", "use": "sig", "crv": "P-256",
             "x": URL_SAFE_NO_PAD.encode(&point[1..33]), "y": URL_SAFE_NO_PAD.encode(&point[33..])},
        ]});
        std::fs::write(dir.path().join("jwks.json"), jwks.to_string()).unwrap();
        Credentials {
            rsa_private_pem: std::fs::read(&rsa_path).unwrap(),
            ec_private_pem: ec.serialize_pem().into_bytes(),
            dir,
        }
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    /// Auth on, with API keys, HS256, the JWKS, the audience and the issuer.
    fn server_args(&self) -> Vec<String> {
        vec![
            "--auth".into(),
            "required".into(),
            "--api-keys".into(),
            self.path("keys.jsonl"),
            "--jwt-hs256-secret-file".into(),
            self.path("hs256.secret"),
            "--jwt-jwks".into(),
            self.path("jwks.json"),
            "--jwt-audience".into(),
            AUDIENCE.into(),
            "--jwt-issuer".into(),
            ISSUER.into(),
        ]
    }

    fn jwt(&self, alg: Algorithm, claims: serde_json::Value) -> String {
        let (key, kid) = match alg {
            Algorithm::HS256 => (EncodingKey::from_secret(HS256_SECRET.as_bytes()), None),
            Algorithm::RS256 => (EncodingKey::from_rsa_pem(&self.rsa_private_pem).unwrap(), Some("rsa-1")),
            Algorithm::ES256 => (EncodingKey::from_ec_pem(&self.ec_private_pem).unwrap(), Some("ec-1")),
            other => panic!("no key for {other:?}"),
        };
        let mut header = Header::new(alg);
        header.kid = kid.map(String::from);
        jsonwebtoken::encode(&header, &claims, &key).unwrap()
    }
}

fn openssl(args: &[&str]) -> String {
    let output = Command::new("openssl").args(args).output().expect("the openssl CLI");
    assert!(
        output.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

/// Valid claims for `sub`, apps [helper], an hour to live.
fn claims(sub: &str) -> serde_json::Value {
    json!({"sub": sub, "apps": [APP], "aud": AUDIENCE, "iss": ISSUER, "exp": now() + 3600, "nbf": now() - 10})
}

fn agents_file(dir: &Path) -> PathBuf {
    let path = dir.join("agents.yaml");
    std::fs::write(&path, AGENTS).unwrap();
    path
}

async fn spawn_server(args: Vec<String>) -> ServiceProcess {
    ServiceProcess::spawn("adk-server", &args, &[]).await
}

/// Runs the binary with `args` on a free port and expects it to exit with an
/// error within 30 s (it is killed otherwise); returns what it printed.
async fn startup_failure(bin: &str, args: &[String]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("out.log");
    let file = std::fs::File::create(&log).unwrap();
    let mut child = tokio::process::Command::new(workspace_bin(bin))
        .args(args)
        .args(["--listen", "127.0.0.1:0", "--metrics-listen", "off"])
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait()).await;
    let text = std::fs::read_to_string(&log).unwrap();
    match status {
        Ok(status) => assert!(!status.unwrap().success(), "{bin} {args:?} exited 0:\n{text}"),
        Err(_) => panic!("{bin} {args:?} kept running instead of failing at startup:\n{text}"),
    }
    text
}

// ---------------------------------------------------------------- clients

type Authed = InterceptedService<Channel, Bearer>;

#[derive(Clone)]
struct Bearer(Option<String>);

impl tonic::service::Interceptor for Bearer {
    fn call(&mut self, mut request: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(token) = &self.0 {
            let value = MetadataValue::try_from(format!("Bearer {token}")).unwrap();
            request.metadata_mut().insert("authorization", value);
        }
        Ok(request)
    }
}

struct Clients {
    sessions: SessionServiceClient<Authed>,
    artifacts: ArtifactServiceClient<Authed>,
    runner: AgentRunnerClient<Authed>,
}

async fn clients(server: &ServiceProcess, token: Option<&str>) -> Clients {
    let channel = Channel::from_shared(server.endpoint())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let bearer = Bearer(token.map(String::from));
    Clients {
        sessions: SessionServiceClient::with_interceptor(channel.clone(), bearer.clone()),
        artifacts: ArtifactServiceClient::with_interceptor(channel.clone(), bearer.clone()),
        runner: AgentRunnerClient::with_interceptor(channel, bearer),
    }
}

fn create(user: &str, session: &str) -> pb::CreateSessionRequest {
    pb::CreateSessionRequest {
        app_name: APP.into(),
        user_id: user.into(),
        session_id: session.into(),
        ..Default::default()
    }
}

fn get(app: &str, user: &str, session: &str) -> pb::GetSessionRequest {
    pb::GetSessionRequest {
        app_name: app.into(),
        user_id: user.into(),
        session_id: session.into(),
        ..Default::default()
    }
}

fn code<T>(result: Result<T, tonic::Status>) -> Code {
    match result {
        Ok(_) => Code::Ok,
        Err(status) => status.code(),
    }
}

fn session_request(user: &str, session: &str) -> CreateRequest {
    CreateRequest {
        app_name: APP.into(),
        user_id: user.into(),
        session_id: Some(session.into()),
        state: Default::default(),
        ttl: None,
    }
}

fn upload_request(user: &str) -> UploadRequest {
    UploadRequest {
        app_name: APP.into(),
        user_id: user.into(),
        session_id: "s1".into(),
        file_name: "notes.txt".into(),
        mime_type: "text/plain".into(),
        is_text: true,
        is_file_uri: false,
        version: None,
        custom_metadata: Default::default(),
        size_hint: None,
        display_name: None,
    }
}

fn bytes(data: &'static [u8]) -> ByteStream {
    futures::stream::iter([Ok(data.to_vec())]).boxed()
}

// ---------------------------------------------------------------- TLS

#[tokio::test]
async fn tls_serves_clients_that_trust_its_ca_and_refuses_plaintext() {
    let pki = Pki::new();
    let server = spawn_server(pki.server_args()).await;
    let endpoint = format!("https://127.0.0.1:{}", server.port());

    let trusted = ConnectOptions::new().ca_certificate_pem(&pki.ca_pem);
    let sessions = RemoteSessionService::connect_with(endpoint.clone(), &trusted)
        .await
        .unwrap_or_else(|err| panic!("TLS connect: {err}\n{}", server.tail_log(20)));
    sessions.create(session_request("u", "s1")).await.unwrap();
    let got = sessions
        .get(GetRequest {
            app_name: APP.into(),
            user_id: "u".into(),
            session_id: "s1".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(got.id, "s1");
    sessions.ping().await.expect("health over TLS");
    let artifacts = RemoteArtifactService::connect_with(endpoint.clone(), &trusted)
        .await
        .unwrap();
    artifacts.upload(upload_request("u"), bytes(b"over TLS")).await.unwrap();

    // Plaintext to a TLS port: no gRPC call gets through.
    let plaintext = match RemoteSessionService::connect(server.endpoint()).await {
        Ok(client) => client.create(session_request("u", "s2")).await.map(|_| ()),
        Err(err) => Err(err),
    };
    assert!(plaintext.is_err(), "a plaintext client was served");

    // A client that does not trust the server's CA refuses it.
    let other_ca = ca();
    let untrusting = ConnectOptions::new().ca_certificate_pem(other_ca.pem());
    let result = match RemoteSessionService::connect_with(endpoint, &untrusting).await {
        Ok(client) => client.create(session_request("u", "s3")).await.map(|_| ()),
        Err(err) => Err(err),
    };
    assert!(result.is_err(), "a client trusting another CA connected");
}

#[tokio::test]
async fn mutual_tls_refuses_clients_without_a_certificate_from_its_ca() {
    let pki = Pki::new();
    let mut args = pki.server_args();
    args.extend(["--tls-client-ca".into(), pki.path("ca.pem")]);
    let server = spawn_server(args).await;
    let endpoint = format!("https://127.0.0.1:{}", server.port());

    let attempt = |options: ConnectOptions| {
        let endpoint = endpoint.clone();
        async move {
            let client = RemoteSessionService::connect_with(endpoint, &options).await?;
            client.create(session_request("u", &uuid())).await.map(|_| ())
        }
    };
    let anonymous = ConnectOptions::new().ca_certificate_pem(&pki.ca_pem);
    assert!(
        attempt(anonymous).await.is_err(),
        "a client without a certificate was served"
    );

    let other_ca = ca();
    let (stranger_cert, stranger_key) = leaf(&other_ca, &["stranger.example"]);
    let stranger = ConnectOptions::new()
        .ca_certificate_pem(&pki.ca_pem)
        .client_identity_pem(stranger_cert, stranger_key);
    assert!(
        attempt(stranger).await.is_err(),
        "a client certificate from another CA was accepted"
    );

    let known = ConnectOptions::new()
        .ca_certificate_pem(&pki.ca_pem)
        .client_identity_pem(&pki.client_cert_pem, &pki.client_key_pem);
    attempt(known)
        .await
        .unwrap_or_else(|err| panic!("mTLS client refused: {err}\n{}", server.tail_log(20)));
}

fn uuid() -> String {
    format!("s-{}", now() ^ u64::from(std::process::id()) ^ rand_nanos())
}

fn rand_nanos() -> u64 {
    u64::from(SystemTime::now().duration_since(UNIX_EPOCH).unwrap().subsec_nanos())
}

#[tokio::test]
async fn bad_tls_and_auth_settings_stop_the_server_at_startup() {
    let pki = Pki::new();
    let creds = Credentials::new();
    // (case, arguments, what the error output must say)
    let cases: [(&str, Vec<String>, &str); 5] = [
        (
            "a missing certificate file",
            vec![
                "--tls-cert".into(),
                pki.path("nope.pem"),
                "--tls-key".into(),
                pki.path("server.key"),
            ],
            "nope.pem",
        ),
        (
            "a certificate that is no certificate",
            vec![
                "--tls-cert".into(),
                pki.path("ca.pem"),
                "--tls-key".into(),
                pki.path("ca.pem"),
            ],
            "--tls-cert",
        ),
        (
            "API keys with auth off",
            vec!["--api-keys".into(), creds.path("keys.jsonl")],
            "--auth is off",
        ),
        (
            "auth required with no credential source",
            vec!["--auth".into(), "required".into()],
            "at least one credential source",
        ),
        (
            "an API key file that is not JSON lines",
            vec![
                "--auth".into(),
                "required".into(),
                "--api-keys".into(),
                creds.path("jwks.json"),
            ],
            "jwks.json, line 1",
        ),
    ];
    for (case, args, says) in cases {
        let output = startup_failure("adk-server", &args).await;
        assert!(output.contains(says), "{case}: {says:?} not in:\n{output}");
    }
}

// ---------------------------------------------------------------- authentication

#[tokio::test]
async fn missing_bad_and_expired_credentials_are_unauthenticated() {
    let creds = Credentials::new();
    let server = spawn_server(creds.server_args()).await;

    let expired = creds.jwt(
        Algorithm::HS256,
        json!({"sub": "alice", "apps": [APP], "aud": AUDIENCE, "iss": ISSUER, "exp": now() - 3600}),
    );
    let not_yet = creds.jwt(
        Algorithm::HS256,
        json!({"sub": "alice", "apps": [APP], "aud": AUDIENCE, "iss": ISSUER, "exp": now() + 7200, "nbf": now() + 3600}),
    );
    let wrong_aud = creds.jwt(
        Algorithm::HS256,
        json!({"sub": "alice", "apps": [APP], "aud": "someone-else", "iss": ISSUER, "exp": now() + 3600}),
    );
    let wrong_iss = creds.jwt(
        Algorithm::HS256,
        json!({"sub": "alice", "apps": [APP], "aud": AUDIENCE, "iss": "https://evil.example", "exp": now() + 3600}),
    );
    let no_aud = creds.jwt(
        Algorithm::HS256,
        json!({"sub": "alice", "apps": [APP], "iss": ISSUER, "exp": now() + 3600}),
    );
    let forged = {
        let key = EncodingKey::from_secret(b"not-the-servers-secret-not-the-servers-secret");
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims("alice"), &key).unwrap()
    };
    let cases: Vec<(&str, Option<String>, &str)> = vec![
        ("no token", None, "requires a credential"),
        ("unknown API key", Some("not-a-key".into()), "not a valid credential"),
        ("expired JWT", Some(expired), "expired"),
        ("JWT not valid yet", Some(not_yet), "not valid yet"),
        ("wrong audience", Some(wrong_aud), "audience"),
        ("wrong issuer", Some(wrong_iss), "issuer"),
        ("no audience", Some(no_aud), "`aud`"),
        ("forged signature", Some(forged), "signature"),
    ];
    for (what, token, expected) in cases {
        let mut clients = clients(&server, token.as_deref()).await;
        let status = clients
            .sessions
            .get_session(get(APP, "alice", "s1"))
            .await
            .expect_err(what);
        assert_eq!(status.code(), Code::Unauthenticated, "{what}: {status:?}");
        assert!(status.message().contains(expected), "{what}: {}", status.message());
        if let Some(token) = &token {
            assert!(
                !status.message().contains(token.as_str()),
                "{what}: the token is echoed"
            );
        }
        // Streaming calls too, before any message is answered.
        let watch = clients
            .sessions
            .watch_session(pb::WatchSessionRequest {
                app_name: APP.into(),
                user_id: "alice".into(),
                session_id: "s1".into(),
                ..Default::default()
            })
            .await;
        assert_eq!(code(watch), Code::Unauthenticated, "{what}: watch");
    }
    // A malformed authorization value.
    let channel = Channel::from_shared(server.endpoint())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut raw = SessionServiceClient::new(channel);
    let mut request = tonic::Request::new(get(APP, "alice", "s1"));
    request
        .metadata_mut()
        .insert("authorization", MetadataValue::from_static("Basic YWxpY2U6cHc="));
    let status = raw.get_session(request).await.unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated);
    assert!(status.message().contains("Bearer"), "{}", status.message());
}

#[tokio::test]
async fn hs256_rs256_and_es256_jwts_are_accepted() {
    let creds = Credentials::new();
    let server = spawn_server(creds.server_args()).await;
    for alg in [Algorithm::HS256, Algorithm::RS256, Algorithm::ES256] {
        let token = creds.jwt(alg, claims("alice"));
        let mut clients = clients(&server, Some(&token)).await;
        let session = format!("{alg:?}");
        clients
            .sessions
            .create_session(create("alice", &session))
            .await
            .unwrap_or_else(|status| panic!("{alg:?}: {status:?}"));
        let bobs = clients.sessions.get_session(get(APP, "bob", &session)).await;
        assert_eq!(code(bobs), Code::PermissionDenied, "{alg:?}: `sub` binds the user");
        let elsewhere = clients.sessions.get_session(get("other-app", "alice", &session)).await;
        assert_eq!(
            code(elsewhere),
            Code::PermissionDenied,
            "{alg:?}: `apps` binds the apps"
        );
    }
    // An RS256 token under the EC key's kid, and an admin token.
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some("ec-1".into());
    let confused = jsonwebtoken::encode(
        &header,
        &claims("alice"),
        &EncodingKey::from_rsa_pem(&creds.rsa_private_pem).unwrap(),
    )
    .unwrap();
    let mut clients_confused = clients(&server, Some(&confused)).await;
    let status = clients_confused
        .sessions
        .get_session(get(APP, "alice", "HS256"))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
    let mut admin_claims = claims("ops");
    admin_claims["role"] = json!("admin");
    let admin = creds.jwt(Algorithm::ES256, admin_claims);
    let mut admin = clients(&server, Some(&admin)).await;
    admin.sessions.get_session(get(APP, "alice", "RS256")).await.unwrap();
}

/// A JWT `sub` is the user id, whatever it holds: an Auth0 subject (`auth0|…`) works on
/// every RPC, on a Redis Cluster, and binds the user as any id does (a subject one
/// character apart is another user). State reads and session-less `user:` artifacts
/// included.
#[tokio::test]
async fn auth0_subjects_are_user_ids_on_a_redis_cluster() {
    const SUBJECT: &str = "auth0|5f7c8ec7c33c6c004bbafe82";
    const NEIGHBOUR: &str = "auth0|5f7c8ec7c33c6c004bbafe8";
    let cluster = RedisCluster::start(3).await;
    let creds = Credentials::new();
    let mut args = creds.server_args();
    args.extend(["--store-url".to_string(), cluster.url()]);
    let server = spawn_server(args).await;
    let token = creds.jwt(Algorithm::HS256, claims(SUBJECT));
    let mut own = clients(&server, Some(&token)).await;
    let session = "tenant:42/s{1}";
    let mut request = create(SUBJECT, session);
    request.state = Some(adk_grpc_proto::ordered::Struct::from([(
        "user:theme".to_string(),
        text_value("dark"),
    )]));
    own.sessions
        .create_session(request)
        .await
        .expect("create as the Auth0 subject");
    let got = own.sessions.get_session(get(APP, SUBJECT, session)).await.expect("get");
    assert_eq!(got.get_ref().user_id, SUBJECT);

    let user_state = |user: &str| pb::GetUserStateRequest {
        app_name: APP.into(),
        user_id: user.into(),
    };
    let state = own
        .sessions
        .get_user_state(user_state(SUBJECT))
        .await
        .expect("user state");
    let fields = &state.get_ref().state.as_ref().expect("a state");
    assert_eq!(fields.keys().collect::<Vec<_>>(), ["theme"], "keys without user:");
    let app_state = pb::GetAppStateRequest { app_name: APP.into() };
    own.sessions
        .get_app_state(app_state)
        .await
        .expect("a user reads the app's state");

    // A user: artifact without a session, listed without a session.
    let avatar = pb::ArtifactRef {
        app_name: APP.into(),
        user_id: SUBJECT.into(),
        session_id: String::new(),
        file_name: "user:avatar.png".into(),
    };
    let save = pb::SaveArtifactRequest {
        r#ref: Some(avatar.clone()),
        part: Some(pb::Part::from(&adk_grpc_core::Part::inline_data(
            "image/png",
            vec![1, 2],
        ))),
        ..Default::default()
    };
    own.artifacts.save_artifact(save).await.expect("save without a session");
    let list = |user: &str| pb::ListArtifactsRequest {
        app_name: APP.into(),
        user_id: user.into(),
        session_id: String::new(),
    };
    let names = own.artifacts.list_artifacts(list(SUBJECT)).await.expect("list");
    assert_eq!(names.get_ref().file_names, ["user:avatar.png"]);

    // A subject one character shorter is someone else, for the credential and the store.
    let neighbour_token = creds.jwt(Algorithm::HS256, claims(NEIGHBOUR));
    let mut neighbour = clients(&server, Some(&neighbour_token)).await;
    let denied = neighbour.sessions.get_user_state(user_state(SUBJECT)).await;
    assert_eq!(code(denied), Code::PermissionDenied);
    let denied = neighbour.artifacts.list_artifacts(list(SUBJECT)).await;
    assert_eq!(code(denied), Code::PermissionDenied);
    let theirs = neighbour
        .sessions
        .get_user_state(user_state(NEIGHBOUR))
        .await
        .expect("own state");
    assert!(theirs.get_ref().state.as_ref().is_none_or(|s| s.fields.is_empty()));
    let theirs = neighbour
        .artifacts
        .list_artifacts(list(NEIGHBOUR))
        .await
        .expect("own list");
    assert!(theirs.get_ref().file_names.is_empty());
}

// ---------------------------------------------------------------- authorization

#[tokio::test]
async fn a_user_key_touches_only_its_own_user_and_apps_and_an_admin_key_everything() {
    let creds = Credentials::new();
    let agents = agents_file(creds.dir.path());
    let mut args = creds.server_args();
    args.extend(["--agents".into(), agents.display().to_string()]);
    let server = spawn_server(args).await;
    let mut alice = clients(&server, Some(ALICE_KEY)).await;
    let mut admin = clients(&server, Some(ADMIN_KEY)).await;

    // Bob's session and artifact, made by the admin.
    admin.sessions.create_session(create("bob", "b1")).await.unwrap();
    let admin_artifacts =
        RemoteArtifactService::connect_with(server.endpoint(), &ConnectOptions::new().bearer_token(ADMIN_KEY))
            .await
            .unwrap();
    let first = admin_artifacts
        .upload(upload_request("bob"), bytes(b"bob's"))
        .await
        .expect("the admin uploads into bob's artifacts");

    // Alice's own data.
    alice.sessions.create_session(create("alice", "a1")).await.unwrap();
    alice.sessions.get_session(get(APP, "alice", "a1")).await.unwrap();
    let own = alice
        .sessions
        .list_sessions(pb::ListSessionsRequest {
            app_name: APP.into(),
            user_id: "alice".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(own.get_ref().sessions.len(), 1);
    let alice_artifacts =
        RemoteArtifactService::connect_with(server.endpoint(), &ConnectOptions::new().bearer_token(ALICE_KEY))
            .await
            .unwrap();
    alice_artifacts
        .upload(upload_request("alice"), bytes(b"mine"))
        .await
        .unwrap();
    let run = alice
        .runner
        .run(pb::RunRequest {
            app_name: APP.into(),
            user_id: "alice".into(),
            session_id: "a1".into(),
            new_message: Some(pb::Content {
                role: "user".into(),
                parts: vec![pb::Part {
                    kind: Some(pb::part::Kind::Text("hi".into())),
                    ..Default::default()
                }],
            }),
            ..Default::default()
        })
        .await
        .expect("alice runs in her own session");
    let events: Vec<_> = run.into_inner().collect().await;
    assert!(!events.is_empty() && events.iter().all(Result::is_ok), "{events:?}");

    // Everything of bob's, another app, app-wide listing: PERMISSION_DENIED.
    let denied = Code::PermissionDenied;
    let (sessions, runner, artifacts) = (&alice.sessions, &alice.runner, &alice.artifacts);
    let bobs_artifact = pb::ArtifactRef {
        app_name: APP.into(),
        user_id: "bob".into(),
        session_id: "s1".into(),
        file_name: "notes.txt".into(),
    };
    let rows = vec![
        row(
            "bob's session",
            denied,
            on(
                sessions,
                |mut c| async move { c.get_session(get(APP, "bob", "b1")).await },
            ),
        ),
        row(
            "creating as bob",
            denied,
            on(
                sessions,
                |mut c| async move { c.create_session(create("bob", "b2")).await },
            ),
        ),
        row(
            "another app",
            denied,
            on(sessions, |mut c| async move {
                c.get_session(get("other-app", "alice", "a1")).await
            }),
        ),
        row(
            "app-wide ListSessions",
            denied,
            on(sessions, |mut c| async move {
                c.list_sessions(pb::ListSessionsRequest {
                    app_name: APP.into(),
                    ..Default::default()
                })
                .await
            }),
        ),
        row(
            "watching bob's session",
            denied,
            on(sessions, |mut c| async move {
                c.watch_session(pb::WatchSessionRequest {
                    app_name: APP.into(),
                    user_id: "bob".into(),
                    session_id: "b1".into(),
                    ..Default::default()
                })
                .await
            }),
        ),
        row(
            "a run as bob",
            denied,
            on(runner, |mut c| async move {
                c.run(pb::RunRequest {
                    app_name: APP.into(),
                    user_id: "bob".into(),
                    session_id: "b1".into(),
                    ..Default::default()
                })
                .await
            }),
        ),
        row(
            "cancelling bob's run",
            denied,
            on(runner, |mut c| async move {
                c.cancel(pb::CancelRequest {
                    app_name: APP.into(),
                    user_id: "bob".into(),
                    session_id: "b1".into(),
                    ..Default::default()
                })
                .await
            }),
        ),
        row(
            "downloading bob's artifact",
            denied,
            on(artifacts, |mut c| async move {
                c.download_artifact(pb::DownloadArtifactRequest {
                    r#ref: Some(bobs_artifact),
                    ..Default::default()
                })
                .await
            }),
        ),
        row(
            "listing bob's artifacts",
            denied,
            on(artifacts, |mut c| async move {
                c.list_artifacts(pb::ListArtifactsRequest {
                    app_name: APP.into(),
                    user_id: "bob".into(),
                    session_id: "s1".into(),
                })
                .await
            }),
        ),
        row(
            "an app outside her list",
            denied,
            on(runner, |mut c| async move {
                c.get_app(pb::GetAppRequest {
                    app_name: "other-app".into(),
                })
                .await
            }),
        ),
    ];
    check("alice's key", rows).await;
    let upload = alice_artifacts
        .upload(upload_request("bob"), bytes(b"into bob's"))
        .await;
    assert_eq!(
        upload.map(|_| ()).unwrap_err().code(),
        Code::PermissionDenied,
        "uploading into bob's artifacts"
    );
    let versions = admin_artifacts
        .upload(upload_request("bob"), bytes(b"bob again"))
        .await
        .unwrap();
    assert_eq!(
        versions.version,
        first.version + 1,
        "alice's refused upload stored nothing"
    );
    alice
        .runner
        .get_app(pb::GetAppRequest { app_name: APP.into() })
        .await
        .unwrap();
    alice.runner.list_apps(pb::ListAppsRequest {}).await.unwrap();

    // The admin: anyone's data, app-wide listing, watches.
    admin.sessions.get_session(get(APP, "alice", "a1")).await.unwrap();
    let all = admin
        .sessions
        .list_sessions(pb::ListSessionsRequest {
            app_name: APP.into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(all.get_ref().sessions.len(), 2);
    admin
        .sessions
        .watch_session(pb::WatchSessionRequest {
            app_name: APP.into(),
            user_id: "alice".into(),
            session_id: "a1".into(),
            ..Default::default()
        })
        .await
        .expect("the admin watches alice's session");
}

fn text_value(text: &str) -> adk_grpc_proto::ordered::Value {
    adk_grpc_proto::ordered::Value {
        kind: Some(adk_grpc_proto::ordered::value::Kind::StringValue(text.into())),
    }
}

fn hello() -> Option<pb::Content> {
    Some(pb::Content {
        role: "user".into(),
        parts: vec![pb::Part {
            kind: Some(pb::part::Kind::Text("hi".into())),
            ..Default::default()
        }],
    })
}

/// App state is shared by every user of the app: a user credential may not write app:
/// keys through any of the three requests that carry state (CreateSession `state`,
/// AppendEvent `event.actions.state_delta`, Run `state_delta`), and nothing of a refused
/// request is stored. An admin credential may; an agent in the runner (output_key
/// app:last_reply) still writes app state when a user runs it.
#[tokio::test]
async fn only_admin_credentials_write_app_state_and_agents_still_do() {
    let creds = Credentials::new();
    let agents = agents_file(creds.dir.path());
    let mut args = creds.server_args();
    args.extend(["--agents".into(), agents.display().to_string()]);
    let server = spawn_server(args).await;
    let mut alice = clients(&server, Some(ALICE_KEY)).await;
    let mut admin = clients(&server, Some(ADMIN_KEY)).await;
    let banner = || {
        [
            ("app:banner".to_string(), text_value("hacked")),
            ("topic".to_string(), text_value("x")),
        ]
    };

    let mut own = create("alice", "a1");
    own.state = Some(adk_grpc_proto::ordered::Struct::from_iter([(
        "user:lang".to_string(),
        text_value("en"),
    )]));
    alice
        .sessions
        .create_session(own)
        .await
        .expect("user: keys are hers to write");

    // Each request that carries state, refused naming its own field and the app: key.
    let mut with_banner = create("alice", "a0");
    with_banner.state = Some(adk_grpc_proto::ordered::Struct::from_iter(banner()));
    let append = pb::AppendEventRequest {
        app_name: APP.into(),
        user_id: "alice".into(),
        session_id: "a1".into(),
        event: Some(pb::Event {
            author: "user".into(),
            content: hello(),
            actions: Some(pb::EventActions {
                state_delta: banner().into_iter().collect(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        precondition: None,
    };
    let run = pb::RunRequest {
        app_name: APP.into(),
        user_id: "alice".into(),
        session_id: "a1".into(),
        new_message: hello(),
        state_delta: banner().into_iter().collect(),
        ..Default::default()
    };
    let update = || pb::UpdateAppStateRequest {
        app_name: APP.into(),
        state_delta: Some(adk_grpc_proto::ordered::Struct::from([(
            "app:banner".to_string(),
            text_value("welcome"),
        )])),
    };
    let denied = Code::PermissionDenied;
    let refused_append = append.clone();
    let refused_update = update();
    let rows = vec![
        row(
            "CreateSession",
            denied,
            on(
                &alice.sessions,
                |mut c| async move { c.create_session(with_banner).await },
            ),
        )
        .naming(&["state", "\"app:banner\""], &[]),
        row(
            "AppendEvent",
            denied,
            on(
                &alice.sessions,
                |mut c| async move { c.append_event(refused_append).await },
            ),
        )
        .naming(&["event.actions.state_delta", "\"app:banner\""], &[]),
        row(
            "Run",
            denied,
            on(&alice.runner, |mut c| async move { c.run(run).await }),
        )
        .naming(&["state_delta", "\"app:banner\""], &[]),
        row(
            "UpdateAppState",
            denied,
            on(&alice.sessions, |mut c| async move {
                c.update_app_state(refused_update).await
            }),
        )
        .naming(&["state_delta", "\"app:banner\""], &[]),
    ];
    check("alice writing app: state", rows).await;

    // Nothing of a refused request was stored.
    assert_eq!(
        code(admin.sessions.get_session(get(APP, "alice", "a0")).await),
        Code::NotFound,
        "the refused create stored nothing"
    );
    let session = admin
        .sessions
        .get_session(get(APP, "alice", "a1"))
        .await
        .unwrap()
        .into_inner();
    assert!(session.events.is_empty(), "the refused calls stored no event");
    let state = session.state.unwrap_or_default();
    assert!(
        !state.contains_key("app:banner") && !state.contains_key("topic"),
        "{state:?}"
    );
    let app_state = pb::GetAppStateRequest { app_name: APP.into() };
    let untouched = alice.sessions.get_app_state(app_state).await.unwrap().into_inner();
    assert!(
        !untouched.state.unwrap_or_default().contains_key("banner"),
        "the refused update changed nothing"
    );

    // The admin writes app state; alice reads it.
    admin
        .sessions
        .append_event(append)
        .await
        .expect("an admin writes app: keys");
    let seen = alice
        .sessions
        .get_session(get(APP, "alice", "a1"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        seen.state.unwrap_or_default().get("app:banner"),
        Some(&text_value("hacked"))
    );

    // UpdateAppState changes app: state without an event: admins only.
    let updated = admin
        .sessions
        .update_app_state(update())
        .await
        .expect("an admin updates app state");
    let fields = updated.into_inner().state.unwrap_or_default();
    assert_eq!(fields.get("banner"), Some(&text_value("welcome")));
    let seen = alice
        .sessions
        .get_session(get(APP, "alice", "a1"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        seen.state.unwrap_or_default().get("app:banner"),
        Some(&text_value("welcome"))
    );
    assert_eq!(seen.events.len(), 1, "no event was appended for it");

    // Alice's run: the agent's reply goes to app:last_reply, as before.
    let run = alice
        .runner
        .run(pb::RunRequest {
            app_name: APP.into(),
            user_id: "alice".into(),
            session_id: "a1".into(),
            new_message: hello(),
            ..Default::default()
        })
        .await
        .expect("alice runs the agent");
    let events: Vec<_> = run.into_inner().collect().await;
    assert!(!events.is_empty() && events.iter().all(Result::is_ok), "{events:?}");
    let after = alice
        .sessions
        .get_session(get(APP, "alice", "a1"))
        .await
        .unwrap()
        .into_inner();
    assert!(
        after.state.unwrap_or_default().contains_key("app:last_reply"),
        "the agent wrote app state"
    );
}

// ---------------------------------------------------------------- connections

/// Over TLS, a client that connects and never starts (or finishes) the TLS handshake is
/// closed after --handshake-timeout-ms, and a TLS client is served as before.
#[tokio::test]
async fn tls_connections_that_never_finish_the_handshake_are_closed() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let pki = Pki::new();
    let mut args = pki.server_args();
    args.extend(["--handshake-timeout-ms".into(), "500".into()]);
    let server = spawn_server(args).await;
    let addr = format!("127.0.0.1:{}", server.port());
    let started = std::time::Instant::now();
    let mut silent = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let mut half = tokio::net::TcpStream::connect(&addr).await.unwrap();
    // The start of a TLS ClientHello record, never completed.
    half.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01]).await.unwrap();
    for conn in [&mut silent, &mut half] {
        let mut buf = [0u8; 4096];
        let closed = tokio::time::timeout(std::time::Duration::from_secs(10), async {
            loop {
                match conn.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => continue,
                }
            }
        })
        .await;
        assert!(closed.is_ok(), "a stalled TLS handshake kept its connection for 10 s");
    }
    let took = started.elapsed();
    assert!(
        took >= std::time::Duration::from_millis(450) && took < std::time::Duration::from_secs(4),
        "{took:?}"
    );
    let trusted = ConnectOptions::new().ca_certificate_pem(&pki.ca_pem);
    let sessions = RemoteSessionService::connect_with(format!("https://{addr}"), &trusted)
        .await
        .expect("a TLS client connects");
    sessions.ping().await.expect("and is served");
}

#[tokio::test]
async fn health_and_reflection_stay_public_unless_configured_otherwise() {
    let creds = Credentials::new();
    let server = spawn_server(creds.server_args()).await;
    let channel = Channel::from_shared(server.endpoint())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = HealthClient::new(channel.clone());
    health
        .check(HealthCheckRequest { service: String::new() })
        .await
        .expect("health without a credential");
    let listed = Command::new("grpcurl")
        .args(["-plaintext", &format!("127.0.0.1:{}", server.port()), "list"])
        .output()
        .expect("grpcurl");
    assert!(
        String::from_utf8_lossy(&listed.stdout).contains("adk.v1.SessionService"),
        "reflection without a credential: {}",
        String::from_utf8_lossy(&listed.stderr)
    );
    let status = SessionServiceClient::new(channel)
        .get_session(get(APP, "alice", "s1"))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated);

    let mut args = creds.server_args();
    args.extend([
        "--auth-public-health".into(),
        "false".into(),
        "--auth-public-reflection".into(),
        "false".into(),
    ]);
    let private = spawn_server(args).await;
    let channel = Channel::from_shared(private.endpoint())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let status = HealthClient::new(channel.clone())
        .check(HealthCheckRequest { service: String::new() })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated);
    let mut authed = HealthClient::with_interceptor(channel, Bearer(Some(ALICE_KEY.into())));
    authed
        .check(HealthCheckRequest { service: String::new() })
        .await
        .expect("health with a credential");
    let listed = Command::new("grpcurl")
        .args(["-plaintext", &format!("127.0.0.1:{}", private.port()), "list"])
        .output()
        .expect("grpcurl");
    assert!(!listed.status.success(), "reflection served without a credential");
    let listed = Command::new("grpcurl")
        .args([
            "-plaintext",
            "-H",
            &format!("authorization: Bearer {ADMIN_KEY}"),
            &format!("127.0.0.1:{}", private.port()),
            "list",
        ])
        .output()
        .expect("grpcurl");
    assert!(
        String::from_utf8_lossy(&listed.stdout).contains("adk.v1.SessionService"),
        "reflection with a credential: {}",
        String::from_utf8_lossy(&listed.stderr)
    );
}

#[tokio::test]
async fn without_auth_calls_need_no_credential_and_tokens_are_ignored() {
    let server = spawn_server(Vec::new()).await;
    let mut anonymous = clients(&server, None).await;
    anonymous.sessions.create_session(create("bob", "b1")).await.unwrap();
    let mut anyone = clients(&server, Some("whatever")).await;
    anyone.sessions.get_session(get(APP, "bob", "b1")).await.unwrap();
    anyone
        .sessions
        .list_sessions(pb::ListSessionsRequest {
            app_name: APP.into(),
            ..Default::default()
        })
        .await
        .unwrap();
}

// ---------------------------------------------------------------- Redis credentials

#[tokio::test]
async fn redis_passwords_and_acl_users_come_from_the_store_url() {
    let redis = RedisServer::start().await;
    // Credentials set at runtime: the testkit's readiness PING needs none.
    let mut connection = redis.connection().await;
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "adk", "on", ">adk-pass", "~*", "&*", "+@all"])
        .query_async(&mut connection)
        .await
        .unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "requirepass", "default-pass"])
        .query_async(&mut connection)
        .await
        .unwrap();
    let port = redis.port();

    for url in [
        format!("redis://:default-pass@127.0.0.1:{port}"),
        format!("redis://adk:adk-pass@127.0.0.1:{port}"),
    ] {
        let server = ServiceProcess::spawn("adk-session-server", &["--store-url".into(), url.clone()], &[]).await;
        let sessions = RemoteSessionService::connect(server.endpoint()).await.unwrap();
        sessions.create(session_request("u", &uuid())).await.unwrap();
        sessions.ping().await.expect("SERVING with the right credentials");
    }

    for (url, password) in [
        (format!("redis://:wrong-pass@127.0.0.1:{port}"), "wrong-pass"),
        (format!("redis://adk:nope-pass@127.0.0.1:{port}"), "nope-pass"),
    ] {
        let output = startup_failure("adk-session-server", &["--store-url".into(), url.clone()]).await;
        assert!(
            output.contains("cannot open the store") || output.contains("store"),
            "{url}: {output}"
        );
        assert!(
            output.to_lowercase().contains("auth") || output.contains("WRONGPASS") || output.contains("NOAUTH"),
            "{url}: the error says authentication failed: {output}"
        );
        assert!(!output.contains(password), "{url}: the password is logged: {output}");
    }
    // No credentials at all: the connection opens, the first command is refused,
    // and the server reports NOT_SERVING saying why.
    let server = ServiceProcess::spawn(
        "adk-session-server",
        &["--store-url".into(), format!("redis://127.0.0.1:{port}")],
        &[],
    )
    .await;
    let sessions = RemoteSessionService::connect(server.endpoint()).await.unwrap();
    assert_eq!(sessions.ping().await.unwrap_err().code(), Code::Unavailable);
    assert!(server.tail_log(20).contains("NOAUTH"), "{}", server.tail_log(20));
    // Keep the server alive until here.
    drop(redis);
}
