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
