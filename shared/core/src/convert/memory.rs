//! Memories and the `adk.v1.MemoryService` requests, to and from `adk.v1`.

use super::{map_from_struct, map_to_struct, timestamp_from_proto, timestamp_to_proto};
use crate::content::Content;
use crate::error::{AdkError, Result};
use crate::event::Event;
use crate::memory::{AddEventsRequest, AddMemoryRequest, DeleteMemoryRequest, MemoryEntry, SearchMemoryRequest};
use adk_proto::v1 as pb;

impl From<&MemoryEntry> for pb::MemoryEntry {
    fn from(m: &MemoryEntry) -> Self {
        pb::MemoryEntry {
            id: m.id.clone(),
            content: Some(pb::Content::from(&m.content)),
            author: m.author.clone(),
            timestamp: m.timestamp.map(timestamp_to_proto),
            custom_metadata: (!m.custom_metadata.is_empty()).then(|| map_to_struct(m.custom_metadata.iter())),
        }
    }
}

impl MemoryEntry {
    /// The entry at `path` (e.g. `memories[0]`), naming a bad value inside it.
    pub fn from_proto(path: &str, m: &pb::MemoryEntry) -> Result<Self> {
        let content = match &m.content {
            Some(c) => Content::from_proto(&format!("{path}.content"), c)?,
            None => Content::default(),
        };
        Ok(MemoryEntry {
            id: m.id.clone(),
            content,
            author: m.author.clone(),
            timestamp: m
                .timestamp
                .as_ref()
                .map(|t| timestamp_from_proto(&format!("{path}.timestamp"), t))
                .transpose()?,
            custom_metadata: map_from_struct(&format!("{path}.custom_metadata"), m.custom_metadata.as_ref())?,
        })
    }
}

pub fn add_memory_from_proto(r: pb::AddMemoryRequest) -> Result<AddMemoryRequest> {
    let memories = r
        .memories
        .iter()
        .enumerate()
        .map(|(i, m)| MemoryEntry::from_proto(&format!("memories[{i}]"), m))
        .collect::<Result<_>>()?;
    Ok(AddMemoryRequest {
        app_name: r.app_name,
        user_id: r.user_id,
        memories,
        custom_metadata: map_from_struct("custom_metadata", r.custom_metadata.as_ref())?,
    })
}

pub fn add_memory_to_proto(r: &AddMemoryRequest) -> pb::AddMemoryRequest {
    pb::AddMemoryRequest {
        app_name: r.app_name.clone(),
        user_id: r.user_id.clone(),
        memories: r.memories.iter().map(pb::MemoryEntry::from).collect(),
        custom_metadata: (!r.custom_metadata.is_empty()).then(|| map_to_struct(r.custom_metadata.iter())),
    }
}

pub fn add_events_from_proto(r: pb::AddEventsToMemoryRequest) -> Result<AddEventsRequest> {
    let events = r
        .events
        .iter()
        .enumerate()
        .map(|(i, e)| Event::try_from(e).map_err(|err| err.within(&format!("events[{i}]"))))
        .collect::<Result<_>>()?;
    Ok(AddEventsRequest {
        app_name: r.app_name,
        user_id: r.user_id,
        session_id: r.session_id,
        events,
        custom_metadata: map_from_struct("custom_metadata", r.custom_metadata.as_ref())?,
    })
}

pub fn add_events_to_proto(r: &AddEventsRequest) -> pb::AddEventsToMemoryRequest {
    pb::AddEventsToMemoryRequest {
        app_name: r.app_name.clone(),
        user_id: r.user_id.clone(),
        session_id: r.session_id.clone(),
        events: r.events.iter().map(pb::Event::from).collect(),
        custom_metadata: (!r.custom_metadata.is_empty()).then(|| map_to_struct(r.custom_metadata.iter())),
    }
}

pub fn search_from_proto(r: pb::SearchMemoryRequest) -> Result<SearchMemoryRequest> {
    let limit = usize::try_from(r.limit)
        .map_err(|_| AdkError::invalid("limit", format!("must be 0 or more, got {}", r.limit)))?;
    Ok(SearchMemoryRequest {
        app_name: r.app_name,
        user_id: r.user_id,
        query: r.query,
        limit,
    })
}

pub fn search_to_proto(r: &SearchMemoryRequest) -> pb::SearchMemoryRequest {
    pb::SearchMemoryRequest {
        app_name: r.app_name.clone(),
        user_id: r.user_id.clone(),
        query: r.query.clone(),
        limit: i32::try_from(r.limit).unwrap_or(i32::MAX),
    }
}

pub fn delete_from_proto(r: pb::DeleteMemoryRequest) -> DeleteMemoryRequest {
    DeleteMemoryRequest {
        app_name: r.app_name,
        user_id: r.user_id,
        memory_id: r.memory_id,
    }
}
