//! Sessions, their requests and responses, to and from `adk.v1`.

use super::{
    duration_from_proto, duration_to_proto, map_from_struct, map_to_struct, non_empty, non_negative,
    timestamp_from_proto, timestamp_to_proto,
};
use crate::error::{AdkError, Result};
use crate::event::Event;
use crate::session::{
    AppendEventRequest, CreateRequest, DeleteRequest, EncodedEvent, EncodedSession, Events, GetRequest,
    ListEventsRequest, ListEventsResponse, ListRequest, ListResponse, Precondition, Session, WatchRequest,
};
use crate::state::StateMap;
use adk_grpc_proto::field_numbers::EVENT_SEQUENCE;
use adk_grpc_proto::v1 as pb;
use chrono::{DateTime, Utc};

impl From<&Session> for pb::Session {
    fn from(s: &Session) -> Self {
        pb::Session {
            app_name: s.app_name.clone(),
            user_id: s.user_id.clone(),
            id: s.id.clone(),
            state: Some(map_to_struct(s.state.iter())),
            events: s.events.iter().map(pb::Event::from).collect(),
            last_update_time: Some(timestamp_to_proto(s.last_update_time)),
            create_time: Some(timestamp_to_proto(s.create_time)),
            event_count: s.event_count,
            expire_time: s.expire_time.map(timestamp_to_proto),
        }
    }
}

/// The session's ids and events move (a reply built from a session the server is done with).
impl From<Session> for pb::Session {
    fn from(mut s: Session) -> Self {
        let events = std::mem::take(&mut s.events).into_vec();
        pb::Session {
            app_name: std::mem::take(&mut s.app_name),
            user_id: std::mem::take(&mut s.user_id),
            id: std::mem::take(&mut s.id),
            events: events.into_iter().map(pb::Event::from).collect(),
            ..pb::Session::from(&s)
        }
    }
}

/// The session's fields move; the encoded events go into the reply as they are.
impl From<EncodedSession> for adk_grpc_proto::SessionReply {
    fn from(s: EncodedSession) -> Self {
        adk_grpc_proto::SessionReply {
            message: pb::Session::from(s.session),
            encoded_events: s.events.into_iter().map(EncodedEvent::into_bytes).collect(),
        }
    }
}

/// The encoded events go into the reply as they are.
impl From<ListEventsResponse<EncodedEvent>> for adk_grpc_proto::ListEventsReply {
    fn from(page: ListEventsResponse<EncodedEvent>) -> Self {
        adk_grpc_proto::ListEventsReply {
            message: pb::ListEventsResponse {
                events: Vec::new(),
                next_page_token: page.next_page_token.unwrap_or_default(),
            },
            encoded_events: page.events.into_iter().map(EncodedEvent::into_bytes).collect(),
        }
    }
}

/// The encoded event is the reply as it is.
impl From<EncodedEvent> for adk_grpc_proto::EventReply {
    fn from(event: EncodedEvent) -> Self {
        adk_grpc_proto::EventReply::Encoded(event.into_bytes())
    }
}

/// The one field of `adk.v1.Event` a read filters by: decoding an event as this skips
/// every other field (tested against `pb::Event` below).
#[derive(Clone, PartialEq, prost::Message)]
struct EventTimestamp {
    #[prost(message, optional, tag = "2")]
    timestamp: Option<prost_types::Timestamp>,
}

impl EncodedEvent {
    /// The event's bytes as the Redis store keeps them, so every store's replies carry the
    /// same bytes for the same event: its encoding without a sequence, then the sequence
    /// (field 16) after it, as the append script writes it (docs/semantics.md, Events 15).
    /// An event not stored (sequence 0) is its plain encoding.
    pub fn encode(event: &Event) -> Self {
        let unsequenced = pb::Event {
            sequence: 0,
            ..pb::Event::from(event)
        };
        let mut bytes = prost::Message::encode_to_vec(&unsequenced);
        if event.sequence != 0 {
            prost::encoding::uint64::encode(EVENT_SEQUENCE, &event.sequence, &mut bytes);
        }
        EncodedEvent::from_stored(event.sequence, bytes)
    }

    /// The event, decoded into the core types (for the reads that need it so).
    pub fn decode(&self) -> Result<Event> {
        let proto = <pb::Event as prost::Message>::decode(self.as_bytes())
            .map_err(|e| AdkError::Internal(format!("stored event does not decode: {e}")))?;
        Event::try_from(proto).map_err(|e| AdkError::Internal(format!("stored event is invalid: {e}")))
    }

    /// The event's timestamp, read without decoding the rest of it; the error says what is
    /// wrong with the bytes.
    pub fn timestamp(&self) -> std::result::Result<DateTime<Utc>, String> {
        let decoded = <EventTimestamp as prost::Message>::decode(self.as_bytes())
            .map_err(|e| format!("it does not decode: {e}"))?;
        let t = decoded.timestamp.ok_or("it has no timestamp")?;
        timestamp_from_proto("event.timestamp", &t).map_err(|e| format!("it is invalid: {e}"))
    }

    /// Whether the bytes can go out as the event stored at [`EncodedEvent::sequence`],
    /// without decoding it: they are whole protobuf fields to their last byte (each key is
    /// a valid key, each value is complete for its wire type: a varint ends, a length fits
    /// in the bytes left), and their `sequence` field (16, a varint) is there and says this
    /// sequence. Nothing is allocated and no field's content is read but the sequence, so a
    /// field whose content is wrong for `adk.v1.Event` (a string that is not UTF-8, a
    /// wrong wire type for its number) is not seen here: the append wrote the event from a
    /// decoded one, so only damage to the stored bytes breaks them, and damage cuts or
    /// shifts the fields, which this sees. The error says what is wrong.
    pub fn check(&self) -> std::result::Result<(), String> {
        use prost::encoding::{DecodeContext, WireType, decode_key, decode_varint, skip_field};
        let mut buf = self.as_bytes();
        let mut sequence = None;
        while !buf.is_empty() {
            let (tag, wire_type) = decode_key(&mut buf).map_err(|e| format!("it does not decode: {e}"))?;
            if tag == EVENT_SEQUENCE {
                if wire_type != WireType::Varint {
                    return Err(format!("its sequence field has wire type {wire_type:?}"));
                }
                sequence = Some(decode_varint(&mut buf).map_err(|e| format!("it does not decode: {e}"))?);
            } else {
                skip_field(wire_type, tag, &mut buf, DecodeContext::default())
                    .map_err(|e| format!("it does not decode: {e}"))?;
            }
        }
        match sequence {
            Some(sequence) if sequence == self.sequence() => Ok(()),
            Some(other) => Err(format!("it says sequence {other}")),
            None => Err("it has no sequence".into()),
        }
    }
}

impl TryFrom<&pb::Session> for Session {
    type Error = AdkError;
    fn try_from(s: &pb::Session) -> Result<Self> {
        Session::try_from(s.clone())
    }
}

impl TryFrom<pb::Session> for Session {
    type Error = AdkError;
    /// The session's events and strings move.
    fn try_from(s: pb::Session) -> Result<Self> {
        let time = |field: &str, t: &Option<prost_types::Timestamp>| -> Result<DateTime<Utc>> {
            t.as_ref()
                .map(|t| timestamp_from_proto(field, t))
                .unwrap_or_else(|| Err(AdkError::invalid(field, "is missing")))
        };
        Ok(Session {
            state: StateMap::new(map_from_struct("session.state", s.state.as_ref())?),
            events: Events::new(s.events.into_iter().map(Event::try_from).collect::<Result<_>>()?),
            create_time: time("session.create_time", &s.create_time)?,
            last_update_time: time("session.last_update_time", &s.last_update_time)?,
            event_count: s.event_count,
            expire_time: s
                .expire_time
                .as_ref()
                .map(|t| timestamp_from_proto("session.expire_time", t))
                .transpose()?,
            id: s.id,
            app_name: s.app_name,
            user_id: s.user_id,
        })
    }
}

// ---------- requests (server side: proto -> core; client side: core -> proto) ----------

impl TryFrom<pb::CreateSessionRequest> for CreateRequest {
    type Error = AdkError;
    fn try_from(r: pb::CreateSessionRequest) -> Result<Self> {
        Ok(CreateRequest {
            state: map_from_struct("state", r.state.as_ref())?,
            ttl: r.ttl.as_ref().map(|d| duration_from_proto("ttl", d)).transpose()?,
            session_id: non_empty(&r.session_id),
            app_name: r.app_name,
            user_id: r.user_id,
        })
    }
}

impl From<&CreateRequest> for pb::CreateSessionRequest {
    fn from(r: &CreateRequest) -> Self {
        pb::CreateSessionRequest {
            app_name: r.app_name.clone(),
            user_id: r.user_id.clone(),
            session_id: r.session_id.clone().unwrap_or_default(),
            state: Some(map_to_struct(r.state.iter())),
            ttl: r.ttl.map(duration_to_proto),
        }
    }
}

impl TryFrom<pb::GetSessionRequest> for GetRequest {
    type Error = AdkError;
    fn try_from(r: pb::GetSessionRequest) -> Result<Self> {
        Ok(GetRequest {
            num_recent_events: r
                .num_recent_events
                .map(|n| non_negative("num_recent_events", n))
                .transpose()?,
            after: r.after.as_ref().map(|t| timestamp_from_proto("after", t)).transpose()?,
            app_name: r.app_name,
            user_id: r.user_id,
            session_id: r.session_id,
            since_compaction: r.since_compaction,
        })
    }
}

impl From<&GetRequest> for pb::GetSessionRequest {
    fn from(r: &GetRequest) -> Self {
        pb::GetSessionRequest {
            app_name: r.app_name.clone(),
            user_id: r.user_id.clone(),
            session_id: r.session_id.clone(),
            num_recent_events: r.num_recent_events.map(|n| n.min(i32::MAX as usize) as i32),
            after: r.after.map(timestamp_to_proto),
            since_compaction: r.since_compaction,
        }
    }
}

impl TryFrom<pb::ListSessionsRequest> for ListRequest {
    type Error = AdkError;
    fn try_from(r: pb::ListSessionsRequest) -> Result<Self> {
        Ok(ListRequest {
            page_size: non_negative("page_size", r.page_size)?,
            user_id: non_empty(&r.user_id),
            page_token: non_empty(&r.page_token),
            app_name: r.app_name,
        })
    }
}

impl From<&ListRequest> for pb::ListSessionsRequest {
    fn from(r: &ListRequest) -> Self {
        pb::ListSessionsRequest {
            app_name: r.app_name.clone(),
            user_id: r.user_id.clone().unwrap_or_default(),
            page_size: r.page_size.min(i32::MAX as usize) as i32,
            page_token: r.page_token.clone().unwrap_or_default(),
        }
    }
}

impl From<&ListResponse> for pb::ListSessionsResponse {
    fn from(r: &ListResponse) -> Self {
        pb::ListSessionsResponse {
            sessions: r.sessions.iter().map(pb::Session::from).collect(),
            next_page_token: r.next_page_token.clone().unwrap_or_default(),
        }
    }
}

impl TryFrom<&pb::ListSessionsResponse> for ListResponse {
    type Error = AdkError;
    fn try_from(r: &pb::ListSessionsResponse) -> Result<Self> {
        Ok(ListResponse {
            sessions: r.sessions.iter().map(Session::try_from).collect::<Result<_>>()?,
            next_page_token: non_empty(&r.next_page_token),
        })
    }
}

impl From<pb::DeleteSessionRequest> for DeleteRequest {
    fn from(r: pb::DeleteSessionRequest) -> Self {
        DeleteRequest {
            app_name: r.app_name,
            user_id: r.user_id,
            session_id: r.session_id,
        }
    }
}

impl From<&DeleteRequest> for pb::DeleteSessionRequest {
    fn from(r: &DeleteRequest) -> Self {
        pb::DeleteSessionRequest {
            app_name: r.app_name.clone(),
            user_id: r.user_id.clone(),
            session_id: r.session_id.clone(),
        }
    }
}

impl From<pb::ForkSessionRequest> for crate::history::ForkRequest {
    fn from(r: pb::ForkSessionRequest) -> Self {
        crate::history::ForkRequest {
            app_name: r.app_name,
            user_id: r.user_id,
            session_id: r.session_id,
            up_to_event_id: r.up_to_event_id,
            new_session_id: Some(r.new_session_id).filter(|id| !id.is_empty()),
        }
    }
}

impl From<&crate::history::ForkRequest> for pb::ForkSessionRequest {
    fn from(r: &crate::history::ForkRequest) -> Self {
        pb::ForkSessionRequest {
            app_name: r.app_name.clone(),
            user_id: r.user_id.clone(),
            session_id: r.session_id.clone(),
            up_to_event_id: r.up_to_event_id.clone(),
            new_session_id: r.new_session_id.clone().unwrap_or_default(),
        }
    }
}

// ---------- scope state reads (GetUserState, GetAppState) ----------

impl From<pb::GetUserStateRequest> for crate::session::UserStateRequest {
    fn from(r: pb::GetUserStateRequest) -> Self {
        crate::session::UserStateRequest {
            app_name: r.app_name,
            user_id: r.user_id,
        }
    }
}

impl From<&crate::session::UserStateRequest> for pb::GetUserStateRequest {
    fn from(r: &crate::session::UserStateRequest) -> Self {
        pb::GetUserStateRequest {
            app_name: r.app_name.clone(),
            user_id: r.user_id.clone(),
        }
    }
}

impl From<pb::GetAppStateRequest> for crate::session::AppStateRequest {
    fn from(r: pb::GetAppStateRequest) -> Self {
        crate::session::AppStateRequest { app_name: r.app_name }
    }
}

impl From<&crate::session::AppStateRequest> for pb::GetAppStateRequest {
    fn from(r: &crate::session::AppStateRequest) -> Self {
        pb::GetAppStateRequest {
            app_name: r.app_name.clone(),
        }
    }
}

impl TryFrom<pb::UpdateAppStateRequest> for crate::session::UpdateAppStateRequest {
    type Error = AdkError;
    fn try_from(r: pb::UpdateAppStateRequest) -> Result<Self> {
        Ok(crate::session::UpdateAppStateRequest {
            app_name: r.app_name,
            state_delta: map_from_struct("state_delta", r.state_delta.as_ref())?,
        })
    }
}

impl From<&crate::session::UpdateAppStateRequest> for pb::UpdateAppStateRequest {
    fn from(r: &crate::session::UpdateAppStateRequest) -> Self {
        pb::UpdateAppStateRequest {
            app_name: r.app_name.clone(),
            state_delta: Some(map_to_struct(r.state_delta.iter())),
        }
    }
}

impl TryFrom<pb::AppendEventRequest> for AppendEventRequest {
    type Error = AdkError;
    fn try_from(r: pb::AppendEventRequest) -> Result<Self> {
        let event = r.event.ok_or_else(|| AdkError::invalid("event", "is required"))?;
        let precondition = r.precondition.and_then(|p| p.expected).map(|expected| match expected {
            pb::append_precondition::Expected::LastEventId(id) => Precondition::LastEventId(id),
            pb::append_precondition::Expected::LastSequence(seq) => Precondition::LastSequence(seq),
        });
        let (event, timestamp_missing) = Event::from_proto_unstamped(event)?;
        Ok(AppendEventRequest {
            timestamp_missing,
            event,
            precondition,
            app_name: r.app_name,
            user_id: r.user_id,
            session_id: r.session_id,
        })
    }
}

impl From<&AppendEventRequest> for pb::AppendEventRequest {
    fn from(r: &AppendEventRequest) -> Self {
        use pb::append_precondition::Expected;
        pb::AppendEventRequest {
            app_name: r.app_name.clone(),
            user_id: r.user_id.clone(),
            session_id: r.session_id.clone(),
            event: Some(pb::Event {
                timestamp: (!r.timestamp_missing).then(|| timestamp_to_proto(r.event.timestamp)),
                ..pb::Event::from(&r.event)
            }),
            // A lease fence has no wire form: leases live in the store, and only runners
            // that write to the store directly (never through this API) take them.
            precondition: r.precondition.as_ref().and_then(|p| {
                let expected = match p {
                    Precondition::LastEventId(id) => Expected::LastEventId(id.clone()),
                    Precondition::LastSequence(seq) => Expected::LastSequence(*seq),
                    Precondition::LeaseHeldBy(_) => return None,
                };
                Some(pb::AppendPrecondition {
                    expected: Some(expected),
                })
            }),
        }
    }
}

impl TryFrom<pb::ListEventsRequest> for ListEventsRequest {
    type Error = AdkError;
    fn try_from(r: pb::ListEventsRequest) -> Result<Self> {
        Ok(ListEventsRequest {
            page_size: non_negative("page_size", r.page_size)?,
            page_token: non_empty(&r.page_token),
            newest_first: r.newest_first,
            app_name: r.app_name,
            user_id: r.user_id,
            session_id: r.session_id,
        })
    }
}

impl From<&ListEventsRequest> for pb::ListEventsRequest {
    fn from(r: &ListEventsRequest) -> Self {
        pb::ListEventsRequest {
            app_name: r.app_name.clone(),
            user_id: r.user_id.clone(),
            session_id: r.session_id.clone(),
            page_size: r.page_size.min(i32::MAX as usize) as i32,
            page_token: r.page_token.clone().unwrap_or_default(),
            newest_first: r.newest_first,
        }
    }
}

impl From<&ListEventsResponse> for pb::ListEventsResponse {
    fn from(r: &ListEventsResponse) -> Self {
        pb::ListEventsResponse {
            events: r.events.iter().map(pb::Event::from).collect(),
            next_page_token: r.next_page_token.clone().unwrap_or_default(),
        }
    }
}

impl From<ListEventsResponse> for pb::ListEventsResponse {
    fn from(r: ListEventsResponse) -> Self {
        pb::ListEventsResponse {
            events: r.events.into_iter().map(pb::Event::from).collect(),
            next_page_token: r.next_page_token.unwrap_or_default(),
        }
    }
}

impl TryFrom<&pb::ListEventsResponse> for ListEventsResponse {
    type Error = AdkError;
    fn try_from(r: &pb::ListEventsResponse) -> Result<Self> {
        ListEventsResponse::try_from(r.clone())
    }
}

impl TryFrom<pb::ListEventsResponse> for ListEventsResponse {
    type Error = AdkError;
    fn try_from(r: pb::ListEventsResponse) -> Result<Self> {
        Ok(ListEventsResponse {
            events: r.events.into_iter().map(Event::try_from).collect::<Result<_>>()?,
            next_page_token: non_empty(&r.next_page_token),
        })
    }
}

impl From<pb::WatchSessionRequest> for WatchRequest {
    fn from(r: pb::WatchSessionRequest) -> Self {
        WatchRequest {
            app_name: r.app_name,
            user_id: r.user_id,
            session_id: r.session_id,
            after_sequence: r.after_sequence,
        }
    }
}

impl From<&WatchRequest> for pb::WatchSessionRequest {
    fn from(r: &WatchRequest) -> Self {
        pb::WatchSessionRequest {
            app_name: r.app_name.clone(),
            user_id: r.user_id.clone(),
            session_id: r.session_id.clone(),
            after_sequence: r.after_sequence,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::tests::rich_event;
    use prost::Message;
    use serde_json::json;
    use std::collections::HashMap;

    #[test]
    fn an_encoded_session_replies_with_the_bytes_of_the_decoded_one() {
        let mut event = rich_event();
        event.timestamp = DateTime::from_timestamp(1_700_000_000, 123_456_789).unwrap();
        event.sequence = 7;
        let encoded = EncodedEvent::encode(&event);
        // The one field read without decoding the event is the event's timestamp.
        assert_eq!(encoded.timestamp().unwrap(), event.timestamp);
        assert_eq!(pb::Event::decode(encoded.as_bytes()).unwrap(), pb::Event::from(&event));
        let session = Session {
            id: "s".into(),
            app_name: "app".into(),
            user_id: "u".into(),
            state: StateMap::new(HashMap::from([("k".to_string(), json!(1))])),
            events: Events::new(vec![event.clone(), Event::new("i")]),
            create_time: event.timestamp,
            last_update_time: event.timestamp,
            event_count: 2,
            expire_time: None,
        };
        let reply = adk_grpc_proto::SessionReply::from(EncodedSession::from(session.clone()));
        let bytes = reply.encode_to_vec();
        // The events follow the other fields; decoded, the reply is the session's.
        assert_eq!(bytes.len(), pb::Session::from(&session).encoded_len());
        assert_eq!(
            pb::Session::decode(bytes.as_slice()).unwrap(),
            pb::Session::from(&session)
        );
        let broken = EncodedEvent::from_stored(7, vec![0x12, 0x05, 0x01]);
        assert!(broken.timestamp().unwrap_err().contains("does not decode"));
    }

    #[test]
    fn an_event_is_encoded_as_redis_stores_it_and_checked_without_decoding() {
        let mut event = rich_event();
        event.sequence = 300;
        let encoded = EncodedEvent::encode(&event);
        // The encoding without a sequence, then field 16 (tag bytes 0x80 0x01) and 300 as a
        // varint: the bytes the Redis append script stores (docs/semantics.md, Events 15).
        // (Map entries come in no fixed order, so the bytes before it are compared decoded.)
        let (unsequenced, sequence) = encoded.as_bytes().split_at(encoded.as_bytes().len() - 4);
        assert_eq!(sequence, [0x80, 0x01, 0xac, 0x02]);
        assert_eq!(
            pb::Event::decode(unsequenced).unwrap(),
            pb::Event {
                sequence: 0,
                ..pb::Event::from(&event)
            }
        );
        assert_eq!(pb::Event::decode(encoded.as_bytes()).unwrap(), pb::Event::from(&event));
        assert_eq!(encoded.sequence(), 300);
        assert_eq!(encoded.check(), Ok(()));

        let stored = |bytes: &[u8]| EncodedEvent::from_stored(300, bytes.to_vec());
        let good = encoded.as_bytes();
        let reason = |bytes: &[u8]| stored(bytes).check().unwrap_err();
        // Cut anywhere, the bytes are no longer whole fields, or lost their sequence.
        for cut in 1..good.len() {
            let error = reason(&good[..cut]);
            assert!(
                error.contains("does not decode") || error.contains("no sequence"),
                "cut at {cut}: {error}"
            );
        }
        assert!(reason(&[0x12, 0x05, 0x01]).contains("does not decode"));
        assert_eq!(reason(&[]), "it has no sequence");
        // Stored under another sequence than the bytes say.
        assert_eq!(
            EncodedEvent::from_stored(301, good.to_vec()).check().unwrap_err(),
            "it says sequence 300"
        );
        // Field 16 with another wire type (a length-delimited field).
        assert!(reason(&[0x82, 0x01, 0x00]).contains("wire type"));
    }

    #[test]
    fn invalid_session_requests_name_the_field() {
        let negative = pb::GetSessionRequest {
            num_recent_events: Some(-1),
            ..Default::default()
        };
        assert!(
            GetRequest::try_from(negative)
                .unwrap_err()
                .to_string()
                .contains("num_recent_events")
        );

        let negative = pb::ListSessionsRequest {
            page_size: -5,
            ..Default::default()
        };
        assert!(
            ListRequest::try_from(negative)
                .unwrap_err()
                .to_string()
                .contains("page_size")
        );

        let no_event = pb::AppendEventRequest::default();
        assert!(
            AppendEventRequest::try_from(no_event)
                .unwrap_err()
                .to_string()
                .contains("event is required")
        );

        let zero_ttl = pb::CreateSessionRequest {
            ttl: Some(prost_types::Duration { seconds: 0, nanos: 0 }),
            ..Default::default()
        };
        assert!(
            CreateRequest::try_from(zero_ttl)
                .unwrap_err()
                .to_string()
                .contains("ttl")
        );
    }

    #[test]
    fn requests_round_trip_through_proto() {
        let req = AppendEventRequest {
            timestamp_missing: false,
            app_name: "a".into(),
            user_id: "u".into(),
            session_id: "s".into(),
            event: rich_event(),
            precondition: Some(Precondition::LastSequence(0)),
        };
        assert_eq!(
            AppendEventRequest::try_from(pb::AppendEventRequest::from(&req)).unwrap(),
            req
        );
        // An event without a timestamp stays without one: the session service stamps it.
        let mut unstamped = pb::AppendEventRequest::from(&req);
        unstamped.event.as_mut().unwrap().timestamp = None;
        let back = AppendEventRequest::try_from(unstamped.clone()).unwrap();
        assert!(back.timestamp_missing);
        assert_eq!(pb::AppendEventRequest::from(&back), unstamped);

        let req = CreateRequest {
            app_name: "a".into(),
            user_id: "u".into(),
            session_id: Some("s".into()),
            state: HashMap::from([("user:x".into(), json!([1]))]),
            ttl: Some(std::time::Duration::from_millis(1500)),
        };
        assert_eq!(
            CreateRequest::try_from(pb::CreateSessionRequest::from(&req)).unwrap(),
            req
        );
    }
}
