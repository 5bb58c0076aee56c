//! The ADK domain model: messages, events, scoped state, sessions and the
//! `SessionService` trait, with one error type and lossless conversions to and
//! from the `adk.v1` protobuf messages.

pub mod artifact;
pub mod content;
pub mod convert;
pub mod error;
pub mod event;
pub mod session;
pub mod state;
pub mod validate;

pub use artifact::{ArtifactMetadata, ArtifactService, Artifacts, ByteStream, ScopedArtifacts};
pub use content::{Content, FunctionResponseData, Part};
pub use error::{AdkError, Result};
pub use event::{Event, EventActions, FinishReason, LlmResponse, UsageMetadata, new_event_id};
pub use session::{
    AppendEventRequest, CreateRequest, DeleteRequest, EventStream, Events, GetRequest, ListEventsRequest,
    ListEventsResponse, ListRequest, ListResponse, Precondition, Session, SessionService, WatchRequest,
};
pub use state::{KEY_PREFIX_APP, KEY_PREFIX_TEMP, KEY_PREFIX_USER, ReadonlyState, State, StateMap};
