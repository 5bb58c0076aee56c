//! Memories and the `adk.v1.MemoryService` requests, to and from `adk.v1`.

use super::{map_from_struct, map_to_struct, timestamp_from_proto, timestamp_to_proto};
use crate::content::Content;
use crate::error::{AdkError, Result};
use crate::event::Event;
use crate::memory::{
    AddEventsRequest, AddMemoryRequest, DeleteMemoryRequest, MemoryEntry, SearchMemoryRequest, SearchMemoryResponse,
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
