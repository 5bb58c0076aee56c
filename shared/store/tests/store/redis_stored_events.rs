//! The stored-bytes contract of `proto/adk/v1/event.proto`: the Redis store keeps an
//! event as its protobuf encoding without a sequence, followed by field 16
//! (`sequence`) as the append script writes it. These tests fail if the field is
//! renumbered or retyped, or if the bytes in Redis stop decoding to the event with
//! its sequence.

use adk_grpc_core::{AppendEventRequest, Content, CreateRequest, Event, SessionService};
use adk_grpc_proto::prost_types::FileDescriptorSet;
use adk_grpc_proto::prost_types::field_descriptor_proto::Type;
use adk_grpc_proto::v1 as pb;
use adk_grpc_store::{RedisSessionBackend, StoreConfig};
use adk_grpc_testkit::{RedisServer, unique_prefix};
use prost::Message;

/// The tag the append script writes before the sequence: field 16, wire type varint.
const SEQUENCE_TAG: [u8; 2] = [0x80, 0x01];

#[test]
fn sequence_is_field_16_a_uint64_in_event_proto() {
    let set =
        FileDescriptorSet::decode(adk_grpc_proto::FILE_DESCRIPTOR_SET).expect("the compiled-in descriptors decode");
    let event = set
        .file
        .iter()
        .filter(|file| file.package() == "adk.v1")
        .flat_map(|file| &file.message_type)
        .find(|message| message.name() == "Event")
        .expect("adk.v1.Event is described");
    let sequence = event
        .field
        .iter()
        .find(|field| field.name() == "sequence")
        .expect("Event has a sequence field");
    assert_eq!(
        sequence.number(),
        16,
        "the stored events carry their sequence as field 16"
    );
    assert_eq!(
        sequence.r#type(),
        Type::Uint64,
        "the append script writes the sequence as a varint"
    );
    // The tag the script writes is exactly this field's tag.
    assert_eq!(
        u64::from(SEQUENCE_TAG[0] & 0x7f) | (u64::from(SEQUENCE_TAG[1]) << 7),
        16 << 3,
        "field 16, wire type 0 (varint)"
    );
    assert!(
        adk_grpc_store::session::redis::APPEND_SCRIPT.contains(r"'\128\1'"),
        "the append script writes the tag of field 16 (0x80 0x01)"
    );
}

/// An `XRANGE` entry: its id and its field/value pairs.
type StreamEntry = (String, Vec<(String, Vec<u8>)>);

/// Protobuf base-128 varint.
fn varint(mut n: u64) -> Vec<u8> {
    let mut out = Vec::new();
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
    out
}

#[tokio::test]
async fn stored_event_bytes_are_the_encoding_then_field_16_and_decode_with_the_sequence() {
    let redis = RedisServer::start().await;
    let service = RedisSessionBackend::connect_service(&redis.url(), StoreConfig::default())
        .await
        .expect("connect");
    let app = unique_prefix("stored");
    service
        .create(CreateRequest {
            app_name: app.clone(),
            user_id: "u".into(),
            session_id: Some("s".into()),
            ..Default::default()
        })
        .await
        .expect("create");
    // 130 events: sequences from one varint byte (1..=127) to two (128..=130).
    let mut appended = Vec::new();
    for i in 0..130 {
        let event = Event::new(format!("e-{i}"))
            .with_author("user")
            .with_content(Content::new("user").with_text(format!("message {i}")));
        let stored = service
            .append_event(AppendEventRequest {
                timestamp_missing: false,
                app_name: app.clone(),
                user_id: "u".into(),
                session_id: "s".into(),
                event,
                precondition: None,
            })
            .await
            .expect("append");
        appended.push(stored);
    }

    let mut conn = redis.connection().await;
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("adk:events:*")
        .query_async(&mut conn)
        .await
        .unwrap();
    let [events_key] = keys.as_slice() else {
        panic!("one session's events stream expected, found {keys:?}")
    };
    let entries: Vec<StreamEntry> = redis::cmd("XRANGE")
        .arg(events_key)
        .arg("-")
        .arg("+")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(entries.len(), appended.len());
    for ((entry_id, fields), reply) in entries.iter().zip(&appended) {
        let sequence = reply.sequence;
        assert_eq!(entry_id, &format!("{sequence}-1"));
        let (_, bytes) = fields.iter().find(|(name, _)| name == "e").expect("the event field");
        // The encoding of the event without its sequence, then field 16.
        let without_sequence = pb::Event::from(&Event {
            sequence: 0,
            ..reply.clone()
        })
        .encode_to_vec();
        let mut expected = without_sequence;
        expected.extend_from_slice(&SEQUENCE_TAG);
        expected.extend(varint(sequence));
        assert_eq!(bytes, &expected, "stored bytes of sequence {sequence}");
        // And they decode to the event AppendEvent returned, sequence included.
        let decoded = pb::Event::decode(bytes.as_slice()).expect("stored bytes decode");
        assert_eq!(decoded.sequence, sequence);
        assert_eq!(Event::try_from(&decoded).expect("a valid event"), *reply);
    }
    assert_eq!(appended.last().map(|e| e.sequence), Some(130));
}
