//! Memories and the `adk.v1.MemoryService` requests, to and from `adk.v1`.

use super::{map_from_struct, map_to_struct, timestamp_from_proto, timestamp_to_proto};
use crate::content::Content;
use crate::error::{AdkError, Result};
use crate::event::Event;
use crate::memory::{
    AddEventsRequest, AddMemoryRequest, DeleteMemoryRequest, GenerateMemoriesRequest, GeneratedMemory,
    IngestEventsRequest, IngestOutcome, ListRevisionsRequest, MemoryAction, MemoryEntry, MemoryFact, MemoryRevision,
    MemoryTopic, SearchMemoryRequest, SearchMemoryResponse,
};
use adk_grpc_proto::v1 as pb;
use std::fmt::Display;

impl From<&MemoryEntry> for pb::MemoryEntry {
    fn from(m: &MemoryEntry) -> Self {
        pb::MemoryEntry {
            id: m.id.clone(),
            content: Some(pb::Content::from(&m.content)),
            author: m.author.clone(),
            timestamp: m.timestamp.map(timestamp_to_proto),
            custom_metadata: (!m.custom_metadata.is_empty()).then(|| map_to_struct(m.custom_metadata.iter())),
            fact: m.fact.as_ref().map(pb::MemoryFact::from),
        }
    }
}

impl From<&MemoryFact> for pb::MemoryFact {
    fn from(f: &MemoryFact) -> Self {
        pb::MemoryFact {
            topics: f.topics.clone(),
            revision: f.revision,
            source_event_ids: f.source_event_ids.clone(),
            create_time: f.create_time.map(timestamp_to_proto),
            update_time: f.update_time.map(timestamp_to_proto),
            expire_time: f.expire_time.map(timestamp_to_proto),
        }
    }
}

/// A request's `events`, each converted, an error naming the one that is not valid.
fn events_from_proto(events: &[pb::Event]) -> Result<Vec<Event>> {
    events
        .iter()
        .enumerate()
        .map(|(i, e)| Event::try_from(e).map_err(|err| err.within(&format!("events[{i}]"))))
        .collect()
}

/// An optional timestamp at `path`.
fn time_from_proto(
    path: impl Display,
    t: Option<&prost_types::Timestamp>,
) -> Result<Option<chrono::DateTime<chrono::Utc>>> {
    t.map(|t| timestamp_from_proto(path, t)).transpose()
}

impl MemoryFact {
    /// The fact at `path` (e.g. `memories[0].fact`), naming a bad value inside it.
    pub fn from_proto(path: impl Display, f: &pb::MemoryFact) -> Result<Self> {
        Ok(MemoryFact {
            topics: f.topics.clone(),
            revision: f.revision,
            source_event_ids: f.source_event_ids.clone(),
            create_time: time_from_proto(format_args!("{path}.create_time"), f.create_time.as_ref())?,
            update_time: time_from_proto(format_args!("{path}.update_time"), f.update_time.as_ref())?,
            expire_time: time_from_proto(format_args!("{path}.expire_time"), f.expire_time.as_ref())?,
        })
    }
}

impl From<MemoryAction> for pb::MemoryAction {
    fn from(a: MemoryAction) -> Self {
        match a {
            MemoryAction::Created => pb::MemoryAction::Created,
            MemoryAction::Updated => pb::MemoryAction::Updated,
            MemoryAction::Deleted => pb::MemoryAction::Deleted,
        }
    }
}

impl TryFrom<i32> for MemoryAction {
    type Error = AdkError;

    fn try_from(value: i32) -> Result<Self> {
        match pb::MemoryAction::try_from(value) {
            Ok(pb::MemoryAction::Created) => Ok(MemoryAction::Created),
            Ok(pb::MemoryAction::Updated) => Ok(MemoryAction::Updated),
            Ok(pb::MemoryAction::Deleted) => Ok(MemoryAction::Deleted),
            _ => Err(AdkError::invalid("action", format!("{value} is no memory action"))),
        }
    }
}

impl From<&pb::MemoryTopic> for MemoryTopic {
    fn from(t: &pb::MemoryTopic) -> Self {
        MemoryTopic {
            label: t.label.clone(),
            description: t.description.clone(),
        }
    }
}

impl From<&MemoryTopic> for pb::MemoryTopic {
    fn from(t: &MemoryTopic) -> Self {
        pb::MemoryTopic {
            label: t.label.clone(),
            description: t.description.clone(),
        }
    }
}

impl TryFrom<pb::GenerateMemoriesRequest> for GenerateMemoriesRequest {
    type Error = AdkError;

    fn try_from(r: pb::GenerateMemoriesRequest) -> Result<Self> {
        let events = events_from_proto(&r.events)?;
        Ok(GenerateMemoriesRequest {
            app_name: r.app_name,
            user_id: r.user_id,
            source_session_id: r.source_session_id,
            events,
            topics: r.topics.iter().map(MemoryTopic::from).collect(),
            ttl_seconds: r.ttl_seconds,
        })
    }
}

impl From<&GenerateMemoriesRequest> for pb::GenerateMemoriesRequest {
    fn from(r: &GenerateMemoriesRequest) -> Self {
        pb::GenerateMemoriesRequest {
            app_name: r.app_name.clone(),
            user_id: r.user_id.clone(),
            source_session_id: r.source_session_id.clone(),
            events: r.events.iter().map(pb::Event::from).collect(),
            topics: r.topics.iter().map(pb::MemoryTopic::from).collect(),
            ttl_seconds: r.ttl_seconds,
        }
    }
}

impl TryFrom<pb::IngestEventsRequest> for IngestEventsRequest {
    type Error = AdkError;

    fn try_from(r: pb::IngestEventsRequest) -> Result<Self> {
        let events = events_from_proto(&r.events)?;
        Ok(IngestEventsRequest {
            app_name: r.app_name,
            user_id: r.user_id,
            stream_id: r.stream_id,
            events,
            force_flush: r.force_flush,
        })
    }
}

impl From<&IngestEventsRequest> for pb::IngestEventsRequest {
    fn from(r: &IngestEventsRequest) -> Self {
        pb::IngestEventsRequest {
            app_name: r.app_name.clone(),
            user_id: r.user_id.clone(),
            stream_id: r.stream_id.clone(),
            events: r.events.iter().map(pb::Event::from).collect(),
            force_flush: r.force_flush,
        }
    }
}

impl From<&IngestOutcome> for pb::IngestEventsResponse {
    fn from(o: &IngestOutcome) -> Self {
        pb::IngestEventsResponse {
            buffered_events: i64::try_from(o.buffered_events).unwrap_or(i64::MAX),
            memories: o.memories.iter().map(pb::GeneratedMemory::from).collect(),
        }
    }
}

impl TryFrom<&pb::IngestEventsResponse> for IngestOutcome {
    type Error = AdkError;

    fn try_from(r: &pb::IngestEventsResponse) -> Result<Self> {
        Ok(IngestOutcome {
            buffered_events: u64::try_from(r.buffered_events).unwrap_or(0),
            memories: r
                .memories
                .iter()
                .enumerate()
                .map(|(i, g)| GeneratedMemory::from_proto(format_args!("memories[{i}]"), g))
                .collect::<Result<_>>()?,
        })
    }
}

impl From<&GeneratedMemory> for pb::GeneratedMemory {
    fn from(g: &GeneratedMemory) -> Self {
        pb::GeneratedMemory {
            memory: Some(pb::MemoryEntry::from(&g.memory)),
            action: pb::MemoryAction::from(g.action).into(),
        }
    }
}

impl GeneratedMemory {
    /// The change at `path` (e.g. `memories[0]`).
    pub fn from_proto(path: impl Display, g: &pb::GeneratedMemory) -> Result<Self> {
        let memory = match &g.memory {
            Some(m) => MemoryEntry::from_proto(format_args!("{path}.memory"), m)?,
            None => MemoryEntry::default(),
        };
        let action = MemoryAction::try_from(g.action).map_err(|e| e.within(&path.to_string()))?;
        Ok(GeneratedMemory { memory, action })
    }
}

impl From<&MemoryRevision> for pb::MemoryRevision {
    fn from(r: &MemoryRevision) -> Self {
        pb::MemoryRevision {
            revision: r.revision,
            fact: r.fact.clone(),
            topics: r.topics.clone(),
            source_event_ids: r.source_event_ids.clone(),
            create_time: r.create_time.map(timestamp_to_proto),
            action: pb::MemoryAction::from(r.action).into(),
        }
    }
}

impl MemoryRevision {
    /// The revision at `path` (e.g. `revisions[0]`).
    pub fn from_proto(path: impl Display, r: &pb::MemoryRevision) -> Result<Self> {
        Ok(MemoryRevision {
            revision: r.revision,
            fact: r.fact.clone(),
            topics: r.topics.clone(),
            source_event_ids: r.source_event_ids.clone(),
            create_time: time_from_proto(format_args!("{path}.create_time"), r.create_time.as_ref())?,
            action: MemoryAction::try_from(r.action).map_err(|e| e.within(&path.to_string()))?,
        })
    }
}

impl From<pb::ListMemoryRevisionsRequest> for ListRevisionsRequest {
    fn from(r: pb::ListMemoryRevisionsRequest) -> Self {
        ListRevisionsRequest {
            app_name: r.app_name,
            user_id: r.user_id,
            memory_id: r.memory_id,
        }
    }
}

impl From<&ListRevisionsRequest> for pb::ListMemoryRevisionsRequest {
    fn from(r: &ListRevisionsRequest) -> Self {
        pb::ListMemoryRevisionsRequest {
            app_name: r.app_name.clone(),
            user_id: r.user_id.clone(),
            memory_id: r.memory_id.clone(),
        }
    }
}

impl MemoryEntry {
    /// The entry at `path` (e.g. `memories[0]`), naming a bad value inside it.
    pub fn from_proto(path: impl Display, m: &pb::MemoryEntry) -> Result<Self> {
        let content = match &m.content {
            Some(c) => Content::from_proto(format_args!("{path}.content"), c)?,
            None => Content::default(),
        };
        Ok(MemoryEntry {
            id: m.id.clone(),
            content,
            author: m.author.clone(),
            timestamp: m
                .timestamp
                .as_ref()
                .map(|t| timestamp_from_proto(format_args!("{path}.timestamp"), t))
                .transpose()?,
            custom_metadata: map_from_struct(format_args!("{path}.custom_metadata"), m.custom_metadata.as_ref())?,
            fact: m
                .fact
                .as_ref()
                .map(|f| MemoryFact::from_proto(format_args!("{path}.fact"), f))
                .transpose()?,
        })
    }
}

impl TryFrom<pb::AddMemoryRequest> for AddMemoryRequest {
    type Error = AdkError;

    fn try_from(r: pb::AddMemoryRequest) -> Result<Self> {
        let memories = r
            .memories
            .iter()
            .enumerate()
            .map(|(i, m)| MemoryEntry::from_proto(format_args!("memories[{i}]"), m))
            .collect::<Result<_>>()?;
        Ok(AddMemoryRequest {
            app_name: r.app_name,
            user_id: r.user_id,
            memories,
            custom_metadata: map_from_struct("custom_metadata", r.custom_metadata.as_ref())?,
        })
    }
}

impl From<&AddMemoryRequest> for pb::AddMemoryRequest {
    fn from(r: &AddMemoryRequest) -> Self {
        pb::AddMemoryRequest {
            app_name: r.app_name.clone(),
            user_id: r.user_id.clone(),
            memories: r.memories.iter().map(pb::MemoryEntry::from).collect(),
            custom_metadata: (!r.custom_metadata.is_empty()).then(|| map_to_struct(r.custom_metadata.iter())),
        }
    }
}

impl TryFrom<pb::AddEventsToMemoryRequest> for AddEventsRequest {
    type Error = AdkError;

    fn try_from(r: pb::AddEventsToMemoryRequest) -> Result<Self> {
        let events = events_from_proto(&r.events)?;
        Ok(AddEventsRequest {
            app_name: r.app_name,
            user_id: r.user_id,
            session_id: r.session_id,
            events,
            custom_metadata: map_from_struct("custom_metadata", r.custom_metadata.as_ref())?,
        })
    }
}

impl From<&AddEventsRequest> for pb::AddEventsToMemoryRequest {
    fn from(r: &AddEventsRequest) -> Self {
        pb::AddEventsToMemoryRequest {
            app_name: r.app_name.clone(),
            user_id: r.user_id.clone(),
            session_id: r.session_id.clone(),
            events: r.events.iter().map(pb::Event::from).collect(),
            custom_metadata: (!r.custom_metadata.is_empty()).then(|| map_to_struct(r.custom_metadata.iter())),
        }
    }
}

impl TryFrom<pb::SearchMemoryRequest> for SearchMemoryRequest {
    type Error = AdkError;

    fn try_from(r: pb::SearchMemoryRequest) -> Result<Self> {
        let limit = usize::try_from(r.limit)
            .map_err(|_| AdkError::invalid("limit", format!("must be 0 or more, got {}", r.limit)))?;
        Ok(SearchMemoryRequest {
            app_name: r.app_name,
            user_id: r.user_id,
            query: r.query,
            limit,
        })
    }
}

impl From<&SearchMemoryRequest> for pb::SearchMemoryRequest {
    fn from(r: &SearchMemoryRequest) -> Self {
        pb::SearchMemoryRequest {
            app_name: r.app_name.clone(),
            user_id: r.user_id.clone(),
            query: r.query.clone(),
            limit: i32::try_from(r.limit).unwrap_or(i32::MAX),
        }
    }
}

impl From<pb::DeleteMemoryRequest> for DeleteMemoryRequest {
    fn from(r: pb::DeleteMemoryRequest) -> Self {
        DeleteMemoryRequest {
            app_name: r.app_name,
            user_id: r.user_id,
            memory_id: r.memory_id,
        }
    }
}

impl From<&DeleteMemoryRequest> for pb::DeleteMemoryRequest {
    fn from(r: &DeleteMemoryRequest) -> Self {
        pb::DeleteMemoryRequest {
            app_name: r.app_name.clone(),
            user_id: r.user_id.clone(),
            memory_id: r.memory_id.clone(),
        }
    }
}

impl From<&SearchMemoryResponse> for pb::SearchMemoryResponse {
    fn from(r: &SearchMemoryResponse) -> Self {
        pb::SearchMemoryResponse {
            memories: r.memories.iter().map(pb::MemoryEntry::from).collect(),
        }
    }
}

impl TryFrom<pb::SearchMemoryResponse> for SearchMemoryResponse {
    type Error = AdkError;

    fn try_from(r: pb::SearchMemoryResponse) -> Result<Self> {
        let memories = r
            .memories
            .iter()
            .enumerate()
            .map(|(i, m)| MemoryEntry::from_proto(format_args!("memories[{i}]"), m))
            .collect::<Result<_>>()?;
        Ok(SearchMemoryResponse { memories })
    }
}
