//! The ADK domain model: messages, events, scoped state, sessions and the
//! `SessionService` trait, with one error type and lossless conversions to and
//! from the `adk.v1` protobuf messages.

pub mod agent;
pub mod artifact;
pub mod clock;
pub mod content;
pub mod context;
pub mod convert;
pub mod error;
pub mod event;
pub mod history;
pub mod lease;
pub mod memory;
pub mod model;
pub mod replies;
pub mod run_log;
pub mod session;
pub mod state;
pub mod sync;
pub mod tool;
pub mod validate;

pub use agent::{
    Agent, AgentKind, AgentMode, AgentSpec, RunConfig, StateSchemaCheck, StreamingMode, TransferScope, find_agent,
    parent_of, transfer_targets, transferable_across_tree,
};
pub use artifact::{ArtifactMetadata, ArtifactService, Artifacts, ByteStream, ScopedArtifacts};
pub use clock::Clock;
pub use content::{Content, FunctionCall, FunctionResponse, FunctionResponseData, Part, PartKind, VideoMetadata};
pub use context::{CallbackContext, InvocationContext, ReadonlyContext, ToolContext};
pub use error::{AdkError, Conflict, Exhausted, Existing, Missing, Reason, Result};
pub use event::{
    Event, EventActions, EventCompaction, FinishReason, INTERNAL_METADATA_PREFIX, JsonObject, LlmResponse,
    ModalityTokenCount, ToolConfirmation, Transcription, UsageMetadata, new_event_id,
};
pub use history::{CompactionConfig, ForkRequest};
pub use lease::{
    Acquire, ClaimedRun, LeaseKey, RUN_RECORD_GRACE, Renewal, RunRecord, SessionLease, claim_owner, owner_invocation,
};
pub use memory::{
    CoreMemoryService, Memory, MemoryBackend, MemoryEntry, MemoryService, ScopedMemory, SearchMemoryResponse,
};
pub use model::{
    BuiltinTool, FunctionCallingConfig, FunctionCallingMode, GenerateContentConfig, ImageConfig, Llm, LlmRequest,
    LlmResponseStream, ResponseSchemaAsSent, ThinkingConfig, ThinkingEffort, ToolConfig, ToolDeclaration, ToolListing,
    ask_once, python_json, strip_code_fence, with_snake_case_keys, with_sorted_keys,
};
pub use run_log::{AgentMarks, InvocationMarks, RunLog};
pub use session::backend::SessionBackend;
pub use session::service::CoreSessionService;
pub use session::{
    AppStateRequest, AppendEventRequest, CreateRequest, DeleteRequest, EncodedEvent, EncodedEventStream,
    EncodedSession, EventStream, Events, GetRequest, ListEventsRequest, ListEventsResponse, ListRequest, ListResponse,
    Precondition, RunMark, RunMarksRequest, ScopeState, Session, SessionService, UpdateAppStateRequest,
    UserStateRequest, WatchRequest,
};
pub use state::{KEY_PREFIX_APP, KEY_PREFIX_TEMP, KEY_PREFIX_USER, ReadonlyState, State, StateMap};
pub use tool::{Tool, ToolOutput, Toolset};
