//! The `adk.v1` protobuf API: messages, gRPC clients and servers, generated at
//! build time from `proto/adk/v1`.

pub mod adk {
    pub mod v1 {
        tonic::include_proto!("adk.v1");
    }
}

pub use adk::v1;

/// The encoded `FileDescriptorSet` of every adk.v1 file and its imports, for
/// gRPC server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/adk_descriptor.bin"));

pub use prost_types;
