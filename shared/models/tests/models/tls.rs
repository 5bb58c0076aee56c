//! The HTTPS path: reqwest runs on the ring-backed rustls this crate hands it,
//! and certificates are verified. (No network: a TLS server on loopback with a
//! self-signed certificate that nothing trusts.)

use adk_grpc_core::{Content, Llm, LlmRequest};
use adk_grpc_models::OpenAiCompatible;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::io::Read;
use std::net::TcpListener;
use std::sync::Arc;
use tonic::Code;

const CERT: &[u8] = include_bytes!("data/untrusted-cert.pem");
const KEY: &[u8] = include_bytes!("data/untrusted-key.pem");

/// Accepts one TLS connection and drives the handshake until the client gives up.
fn untrusted_tls_server() -> std::net::SocketAddr {
    let certs = vec![CertificateDer::from_pem_slice(CERT).unwrap()];
    let key = PrivateKeyDer::from_pem_slice(KEY).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let (mut tcp, _) = listener.accept().unwrap();
        let mut tls = rustls::ServerConnection::new(Arc::new(config)).unwrap();
        let mut stream = rustls::Stream::new(&mut tls, &mut tcp);
        let _ = stream.read(&mut [0u8; 1024]); // ends when the client aborts the handshake
    });
    addr
}

#[tokio::test]
async fn https_runs_on_rustls_and_rejects_an_untrusted_certificate() {
    let addr = untrusted_tls_server();
    let model = OpenAiCompatible::new(format!("https://localhost:{}/v1", addr.port()), "m").unwrap();
    let request = LlmRequest {
        contents: vec![Content::new("user").with_text("hi")],
        ..Default::default()
    };
    let err = model.generate_content(request, false).await.err().unwrap();
    assert_eq!(err.code(), Code::Unavailable, "{err}");
    assert!(err.to_string().contains("invalid peer certificate"), "{err}");
}
