//! The `adk.v1` protobuf API: messages, gRPC clients and servers, generated at
//! build time from `proto/adk/v1`.

pub mod adk {
    pub mod v1 {
        tonic::include_proto!("adk.v1");
    }
}

pub use adk::v1;

/// The Agent2Agent protocol v1.0 (`lf.a2a.v1`, gRPC binding).
pub mod lf {
    pub mod a2a {
        pub mod v1 {
            tonic::include_proto!("lf.a2a.v1");
        }
    }
}

pub use lf::a2a::v1 as a2a;

/// The encoded `FileDescriptorSet` of every adk.v1 file, lf.a2a.v1 and their imports, for
/// gRPC server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/adk_descriptor.bin"));

pub use prost_types;

/// The values of the top-level enum `full_name` (`"adk.v1.ErrorReason"`) in declaration
/// order, each with its leading comment on one line (the proto's lines joined by spaces), as
/// [`FILE_DESCRIPTOR_SET`] keeps it. The comments of `adk.v1.ErrorReason` are the
/// documentation of the error reasons: the tests hold the servers, the clients and the docs
/// to them through this.
pub fn enum_value_comments(full_name: &str) -> Vec<(String, String)> {
    use prost::Message;
    // Field numbers of descriptor.proto: a file's enum_type, an enum's value.
    const FILE_ENUM_TYPE: i32 = 5;
    const ENUM_VALUE: i32 = 2;
    let set = prost_types::FileDescriptorSet::decode(FILE_DESCRIPTOR_SET).expect("the build encoded a descriptor set");
    let (package, name) = full_name.rsplit_once('.').unwrap_or(("", full_name));
    for file in set.file.iter().filter(|file| file.package() == package) {
        let Some(index) = file.enum_type.iter().position(|e| e.name() == name) else {
            continue;
        };
        let locations = file
            .source_code_info
            .as_ref()
            .map(|info| info.location.as_slice())
            .unwrap_or_default();
        let comment = |value: usize| {
            let path = [FILE_ENUM_TYPE, index as i32, ENUM_VALUE, value as i32];
            let text = locations
                .iter()
                .find(|location| location.path == path)
                .map(|location| location.leading_comments())
                .unwrap_or_default();
            text.split_whitespace().collect::<Vec<_>>().join(" ")
        };
        let values = &file.enum_type[index].value;
        return values
            .iter()
            .enumerate()
            .map(|(i, value)| (value.name().to_string(), comment(i)))
            .collect();
    }
    Vec::new()
}
