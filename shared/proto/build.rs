//! Compiles `proto/adk/v1/*.proto` and `proto/lf/a2a/v1/a2a.proto` with protox (pure Rust, so a fresh machine
//! needs no system `protoc`) and hands the descriptors to tonic-prost-build.

use prost::Message;
use std::path::PathBuf;

/// Agent2Agent v1.0 (gRPC binding), served by the runner beside adk.v1.AgentRunner.
const A2A_PROTO: &str = "lf/a2a/v1/a2a.proto";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("../../proto");
    println!("cargo:rerun-if-changed={}", root.display());

    // Source info keeps the proto comments, which reflection serves to grpcurl `describe`.
    let mut compiler = protox::Compiler::new([&root])?;
    compiler.include_imports(true).include_source_info(true);
    // Every file of adk/v1, read from the directory, so a new one (errors.proto holds an enum
    // no message uses) cannot be left out of the code and the reflection set.
    let mut protos = Vec::new();
    for entry in std::fs::read_dir(root.join("adk/v1"))? {
        let name = entry?
            .file_name()
            .into_string()
            .map_err(|name| format!("{name:?} is not UTF-8"))?;
        if name.ends_with(".proto") {
            protos.push(format!("adk/v1/{name}"));
        }
    }
    protos.sort();
    protos.push(A2A_PROTO.to_string());
    compiler.open_files(&protos)?;
    let descriptors = compiler.file_descriptor_set();

    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out_dir.join("adk_descriptor.bin"), descriptors.encode_to_vec())?;

    // A second server for adk.v1.SessionService whose replies carrying events are
    // `crate::SessionReply`, `crate::ListEventsReply` and `crate::EventReply`: GetSession,
    // ListEvents and WatchSession pass the stored events on in their encoding instead of
    // decoding and re-encoding them (see lib.rs). Every other type is the one generated
    // above; request messages embedding an `Event` (AppendEventRequest) are among them, so
    // they decode as ever.
    let mut session_proto = descriptors.clone();
    session_proto.file.retain(|file| file.name() == "adk/v1/session.proto");
    if session_proto.file.len() != 1 {
        return Err("adk/v1/session.proto is not among the compiled files".into());
    }
    let reply_dir = out_dir.join("session_reply");
    std::fs::create_dir_all(&reply_dir)?;
    // The field numbers written by hand-made encodings (the replies' encoded events, an
    // event's stored sequence), read from the .proto so that they are written down once.
    let field_number = |full_name: &str, field: &str| -> Result<i32, String> {
        let (package, name) = full_name.rsplit_once('.').unwrap_or(("", full_name));
        descriptors
            .file
            .iter()
            .filter(|file| file.package() == package)
            .flat_map(|file| &file.message_type)
            .filter(|message| message.name() == name)
            .flat_map(|message| &message.field)
            .find(|f| f.name() == field)
            .map(|f| f.number())
            .ok_or_else(|| format!("{full_name} has no field {field}"))
    };
    let field_numbers = [
        ("SESSION_EVENTS", "adk.v1.Session", "events"),
        ("LIST_EVENTS_RESPONSE_EVENTS", "adk.v1.ListEventsResponse", "events"),
        ("EVENT_SEQUENCE", "adk.v1.Event", "sequence"),
    ]
    .iter()
    .map(|(constant, message, field)| {
        let number = field_number(message, field)?;
        Ok(format!(
            "/// `{message}.{field}`.\npub const {constant}: u32 = {number};\n"
        ))
    })
    .collect::<Result<String, String>>()?;
    std::fs::write(out_dir.join("field_numbers.rs"), field_numbers)?;

    // google.protobuf.Struct and its Value and ListValue are `crate::ordered`'s, which keep a
    // struct's fields in their order (prost_types' sort them); the encoding is the same.
    let ordered = |config: tonic_prost_build::Builder| {
        config
            .extern_path(".google.protobuf.Struct", "crate::ordered::Struct")
            .extern_path(".google.protobuf.Value", "crate::ordered::Value")
            .extern_path(".google.protobuf.ListValue", "crate::ordered::ListValue")
    };
    ordered(tonic_prost_build::configure())
        .build_client(true)
        .build_server(true)
        .compile_fds(descriptors)?;

    ordered(tonic_prost_build::configure())
        .build_client(false)
        .build_server(true)
        .out_dir(&reply_dir)
        .extern_path(".adk.v1", "crate::v1")
        .extern_path(".adk.v1.Session", "crate::SessionReply")
        .extern_path(".adk.v1.ListEventsResponse", "crate::ListEventsReply")
        .extern_path(".adk.v1.Event", "crate::EventReply")
        .compile_fds(session_proto)?;
    Ok(())
}
