//! Operators inspect the suite with grpcurl and nothing else: every public RPC of
//! every service is listed and described (with its documentation) through server
//! reflection on the all-in-one binary, and so are the error reasons.

use adk_grpc_testkit::ServiceProcess;
use prost::Message;
use std::process::Command;

const SERVICES: [&str; 4] = [
    "adk.v1.SessionService",
    "adk.v1.ArtifactService",
    "adk.v1.MemoryService",
    "adk.v1.AgentRunner",
];

fn grpcurl(args: &[&str]) -> String {
    let output = Command::new("grpcurl")
        .args(args)
        .output()
        .expect("grpcurl on PATH (the README's test command installs it)");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "grpcurl {args:?} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// The methods each service declares in the protos the binaries are built from.
fn declared_methods() -> Vec<(String, String)> {
    let set = prost_types::FileDescriptorSet::decode(adk_grpc_proto::FILE_DESCRIPTOR_SET).expect("descriptor set");
    set.file
        .iter()
        .filter(|file| file.package() == "adk.v1")
        .flat_map(|file| file.service.iter())
        .flat_map(|service| {
            let full = format!("adk.v1.{}", service.name());
            service.method.iter().map(move |m| (full.clone(), m.name().to_string()))
        })
        .collect()
}

#[tokio::test]
async fn every_public_rpc_is_listed_and_documented_through_reflection() {
    let agents = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/agents.yaml");
    let server = ServiceProcess::spawn("adk-server", &["--agents".into(), agents.into()], &[]).await;
    let address = format!("127.0.0.1:{}", server.port());

    let listed = grpcurl(&["-plaintext", &address, "list"]);
    for service in SERVICES.iter().chain(&["grpc.health.v1.Health"]) {
        assert!(
            listed.lines().any(|l| l.trim() == *service),
            "{service} is not listed:\n{listed}"
        );
    }

    let methods = declared_methods();
    assert!(methods.len() >= 19, "the protos declare every RPC: {methods:?}");
    // One listing per service (each grpcurl call starts a process).
    let listings: std::collections::HashMap<&str, String> = SERVICES
        .iter()
        .map(|service| (*service, grpcurl(&["-plaintext", &address, "list", service])))
        .collect();
    for (service, method) in &methods {
        assert!(SERVICES.contains(&service.as_str()), "{service} is public");
        let rpcs = &listings[service.as_str()];
        assert!(
            rpcs.lines().any(|l| l.trim() == format!("{service}.{method}")),
            "{service}.{method} is listed"
        );
        let described = grpcurl(&["-plaintext", &address, "describe", &format!("{service}.{method}")]);
        assert!(
            described.contains(&format!("rpc {method}")),
            "{service}.{method} is described:\n{described}"
        );
        assert!(
            described.lines().any(|l| l.trim_start().starts_with("//")),
            "{service}.{method} carries its documentation:\n{described}"
        );
    }

    // The error reasons are an enum no message uses: reflection serves it, documented, too.
    let reasons = grpcurl(&["-plaintext", &address, "describe", "adk.v1.ErrorReason"]);
    assert!(
        reasons.contains("SESSION_NOT_FOUND = 1;") && reasons.contains("NOT_FOUND. No session of that id"),
        "adk.v1.ErrorReason is described with its documentation:\n{reasons}"
    );
}
