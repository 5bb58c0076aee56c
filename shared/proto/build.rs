//! Compiles `proto/adk/v1/*.proto` and `proto/lf/a2a/v1/a2a.proto` with protox (pure Rust, so a fresh machine
//! needs no system `protoc`) and hands the descriptors to tonic-prost-build.

use prost::Message;
use std::path::PathBuf;

const PROTOS: &[&str] = &[
    "adk/v1/content.proto",
    "adk/v1/event.proto",
    "adk/v1/session.proto",
    "adk/v1/artifact.proto",
    "adk/v1/runner.proto",
    "adk/v1/memory.proto",
    // Agent2Agent v1.0 (gRPC binding), served by the runner beside adk.v1.AgentRunner.
    "lf/a2a/v1/a2a.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("../../proto");
    println!("cargo:rerun-if-changed={}", root.display());

    // Source info keeps the proto comments, which reflection serves to grpcurl `describe`.
    let mut compiler = protox::Compiler::new([&root])?;
    compiler.include_imports(true).include_source_info(true);
    compiler.open_files(PROTOS)?;
    let descriptors = compiler.file_descriptor_set();

    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out_dir.join("adk_descriptor.bin"), descriptors.encode_to_vec())?;

    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(descriptors)?;
    Ok(())
}
