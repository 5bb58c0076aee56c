//! The `adk.v1` protobuf API: messages, gRPC clients and servers, generated at
//! build time from `proto/adk/v1`.

pub mod adk {
    pub mod v1 {
        tonic::include_proto!("adk.v1");
    }
}

pub use adk::v1;

/// `google.protobuf.Struct`, `Value` and `ListValue` as every generated message holds them:
/// fields kept in their order.
pub mod ordered;

/// The `adk.v1.SessionService` server whose replies carrying events are [`SessionReply`],
/// [`ListEventsReply`] and [`EventReply`] (the session service's handlers use it;
/// `v1::session_service_server` is the same service over the plain messages).
pub mod session_reply {
    include!(concat!(env!("OUT_DIR"), "/session_reply/adk.v1.rs"));
}

/// Field numbers of `adk.v1` that hand-made encodings write, read from the .proto at build time.
pub mod field_numbers {
    include!(concat!(env!("OUT_DIR"), "/field_numbers.rs"));
}

/// A reply `M` whose repeated `adk.v1.Event` field `FIELD` may hold events already encoded:
/// `encoded_events` holds `adk.v1.Event` encodings (as a store keeps them), written into
/// the reply as they are, so a reply costs one copy of each event instead of a decode and
/// an encode (BENCHMARKS.md, "What a call costs the server"). On the wire it is an `M`: the
/// field is repeated and length-delimited, which an `Event` and its bytes encode alike, and
/// decoders accept fields in any order. Decoded, its events land in `message`.
#[derive(Clone, PartialEq, Default, Debug)]
pub struct WithEncodedEvents<M, const FIELD: u32> {
    /// The message; its own events come first in the reply.
    pub message: M,
    /// Encoded events, after the message's own.
    pub encoded_events: Vec<Vec<u8>>,
}

/// An `adk.v1.Session` reply (GetSession, CreateSession, ForkSession).
pub type SessionReply = WithEncodedEvents<v1::Session, { field_numbers::SESSION_EVENTS }>;

/// An `adk.v1.ListEventsResponse` reply (ListEvents).
pub type ListEventsReply = WithEncodedEvents<v1::ListEventsResponse, { field_numbers::LIST_EVENTS_RESPONSE_EVENTS }>;

impl<M, const FIELD: u32> From<M> for WithEncodedEvents<M, FIELD> {
    fn from(message: M) -> Self {
        WithEncodedEvents {
            message,
            encoded_events: Vec::new(),
        }
    }
}

impl<M: prost::Message, const FIELD: u32> prost::Message for WithEncodedEvents<M, FIELD> {
    fn encode_raw(&self, buf: &mut impl prost::bytes::BufMut) {
        self.message.encode_raw(buf);
        prost::encoding::bytes::encode_repeated(FIELD, &self.encoded_events, buf);
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: prost::encoding::WireType,
        buf: &mut impl prost::bytes::Buf,
        ctx: prost::encoding::DecodeContext,
    ) -> Result<(), prost::DecodeError> {
        self.message.merge_field(tag, wire_type, buf, ctx)
    }

    fn encoded_len(&self) -> usize {
        self.message.encoded_len() + prost::encoding::bytes::encoded_len_repeated(FIELD, &self.encoded_events)
    }

    fn clear(&mut self) {
        self.message.clear();
        self.encoded_events.clear();
    }
}

/// An `adk.v1.Event` reply (AppendEvent, each event of a WatchSession stream): an event, or
/// one already encoded (as a store keeps it), written as it is.
#[derive(Clone, PartialEq, Debug)]
// A reply is built once and moved into tonic's encoder: boxing the event would add an
// allocation to every AppendEvent reply to save a copy of a value that is moved once.
#[allow(clippy::large_enum_variant)]
pub enum EventReply {
    Decoded(v1::Event),
    Encoded(Vec<u8>),
}

impl Default for EventReply {
    fn default() -> Self {
        EventReply::Decoded(v1::Event::default())
    }
}

impl From<v1::Event> for EventReply {
    fn from(event: v1::Event) -> Self {
        EventReply::Decoded(event)
    }
}

impl prost::Message for EventReply {
    fn encode_raw(&self, buf: &mut impl prost::bytes::BufMut) {
        match self {
            EventReply::Decoded(event) => event.encode_raw(buf),
            EventReply::Encoded(bytes) => buf.put_slice(bytes),
        }
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: prost::encoding::WireType,
        buf: &mut impl prost::bytes::Buf,
        ctx: prost::encoding::DecodeContext,
    ) -> Result<(), prost::DecodeError> {
        // Only a client decodes replies; merging into encoded bytes decodes them first.
        let mut event = match std::mem::take(self) {
            EventReply::Decoded(event) => event,
            EventReply::Encoded(bytes) => <v1::Event as prost::Message>::decode(bytes.as_slice())?,
        };
        let merged = event.merge_field(tag, wire_type, buf, ctx);
        *self = EventReply::Decoded(event);
        merged
    }

    fn encoded_len(&self) -> usize {
        match self {
            EventReply::Decoded(event) => event.encoded_len(),
            EventReply::Encoded(bytes) => bytes.len(),
        }
    }

    fn clear(&mut self) {
        *self = EventReply::default();
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn a_reply_with_encoded_events_is_the_session_with_those_events() {
        let event = |id: &str, sequence| v1::Event {
            id: id.into(),
            author: "user".into(),
            sequence,
            ..Default::default()
        };
        let session = v1::Session {
            id: "s".into(),
            app_name: "app".into(),
            event_count: 3,
            ..Default::default()
        };
        let reply = SessionReply {
            message: v1::Session {
                events: vec![event("a", 1)],
                ..session.clone()
            },
            encoded_events: vec![event("b", 2).encode_to_vec(), event("c", 3).encode_to_vec()],
        };
        let bytes = reply.encode_to_vec();
        assert_eq!(bytes.len(), reply.encoded_len());
        let expected = v1::Session {
            events: vec![event("a", 1), event("b", 2), event("c", 3)],
            ..session
        };
        assert_eq!(v1::Session::decode(bytes.as_slice()).unwrap(), expected);
        // Decoded as a reply, the events are the session's.
        assert_eq!(
            SessionReply::decode(bytes.as_slice()).unwrap(),
            SessionReply::from(expected)
        );
    }
}
