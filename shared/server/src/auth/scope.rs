//! What each method touches, read from its (first) request message: the one table
//! authorization is decided from. A method missing here is refused (fail closed);
//! a unit test walks the adk.v1 descriptor set so no method can be forgotten.
//!
//! A2A (`lf.a2a.v1.A2AService`) requests name no user: their `tenant` is the app and
//! the user is the credential's own (the handler reads the [`Principal`]), so they
//! touch the app alone. An empty tenant (the server's only app) passes only a
//! credential of every app.

use super::{Principal, Subject};
use adk_grpc_core::AdkError;
use adk_grpc_proto::a2a;
use adk_grpc_proto::a2a::a2a_service_server::SERVICE_NAME as A2A;
use adk_grpc_proto::v1 as pb;
use adk_grpc_proto::v1::{
    agent_runner_server::SERVICE_NAME as RUNNER, artifact_service_server::SERVICE_NAME as ARTIFACTS,
    memory_service_server::SERVICE_NAME as MEMORY, session_service_server::SERVICE_NAME as SESSIONS,
};
use prost::Message;
use std::collections::HashMap;
use tonic::Status;

/// What one call touches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Scope {
    /// Nothing of any app or user (ListApps).
    Nothing,
    /// An app, not a user's data (GetApp).
    App(String),
    /// One user's data in an app; `app_state` when the request also writes state
    /// shared by every user of the app.
    User {
        app: String,
        user: String,
        app_state: Option<AppStateWrite>,
    },
    /// Every user's data in an app (ListSessions without a user).
    AppWide(String),
    /// The app's `app:` state alone, written without a session (UpdateAppState).
    AppState { app: String, write: AppStateWrite },
}

/// An `app:` state key a request writes, and the request field it is in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AppStateWrite {
    field: &'static str,
    key: String,
}

/// The first `app:` key of `keys` (a request's `field`), if any.
fn app_state_write<'a>(field: &'static str, keys: impl IntoIterator<Item = &'a String>) -> Option<AppStateWrite> {
    adk_grpc_core::state::first_app_key(keys).map(|key| AppStateWrite {
        field,
        key: key.to_string(),
    })
}

/// `user`'s data in `app`, with the `app:` state the request writes.
fn user_writing(app: &str, user: &str, app_state: Option<AppStateWrite>) -> Scope {
    Scope::User {
        app: app.to_string(),
        user: user.to_string(),
        app_state,
    }
}

type Extract = fn(&[u8]) -> Result<Scope, Status>;

/// Path (`/adk.v1.SessionService/GetSession`) -> how to read its scope.
pub(crate) struct ScopeTable {
    methods: HashMap<String, Extract>,
}

fn decode<M: Message + Default>(bytes: &[u8]) -> Result<M, Status> {
    M::decode(bytes).map_err(|err| {
        Status::from(AdkError::invalid_with(
            "request",
            format!("the request message does not decode: {err}"),
        ))
    })
}

fn user(app: &str, user: &str) -> Scope {
    user_writing(app, user, None)
}

fn artifact_ref(reference: Option<&pb::ArtifactRef>) -> Scope {
    let reference = reference.cloned().unwrap_or_default();
    user(&reference.app_name, &reference.user_id)
}

impl ScopeTable {
    pub(crate) fn new() -> ScopeTable {
        let entries: [(&str, &str, Extract); 43] = [
            (SESSIONS, "CreateSession", |b| {
                decode::<pb::CreateSessionRequest>(b).map(|m| {
                    let keys = m.state.iter().flat_map(|state| state.keys());
                    user_writing(&m.app_name, &m.user_id, app_state_write("state", keys))
                })
            }),
            (SESSIONS, "GetSession", |b| {
                decode::<pb::GetSessionRequest>(b).map(|m| user(&m.app_name, &m.user_id))
            }),
            (SESSIONS, "ListSessions", |b| {
                decode::<pb::ListSessionsRequest>(b).map(|m| match m.user_id.as_str() {
                    "" => Scope::AppWide(m.app_name),
                    _ => user(&m.app_name, &m.user_id),
                })
            }),
            (SESSIONS, "DeleteSession", |b| {
                decode::<pb::DeleteSessionRequest>(b).map(|m| user(&m.app_name, &m.user_id))
            }),
            (SESSIONS, "AppendEvent", |b| {
                decode::<pb::AppendEventRequest>(b).map(|m| {
                    let actions = m.event.iter().flat_map(|event| event.actions.iter());
                    let keys = actions.flat_map(|actions| actions.state_delta.keys());
                    let app_state = app_state_write("event.actions.state_delta", keys);
                    user_writing(&m.app_name, &m.user_id, app_state)
                })
            }),
            (SESSIONS, "ListEvents", |b| {
                decode::<pb::ListEventsRequest>(b).map(|m| user(&m.app_name, &m.user_id))
            }),
            (SESSIONS, "WatchSession", |b| {
                decode::<pb::WatchSessionRequest>(b).map(|m| user(&m.app_name, &m.user_id))
            }),
            (SESSIONS, "GetUserState", |b| {
                decode::<pb::GetUserStateRequest>(b).map(|m| user(&m.app_name, &m.user_id))
            }),
            // App state is what every session of the app reads already: any credential
            // of the app may read it (writes to it need admin: see `authorize`).
            (SESSIONS, "GetAppState", |b| {
                decode::<pb::GetAppStateRequest>(b).map(|m| Scope::App(m.app_name))
            }),
            // Admins only, whatever the keys: the call writes nothing but app state.
            (SESSIONS, "UpdateAppState", |b| {
                decode::<pb::UpdateAppStateRequest>(b).map(|m| {
                    let keys = m.state_delta.iter().flat_map(|delta| delta.keys());
                    let write = app_state_write("state_delta", keys).unwrap_or(AppStateWrite {
                        field: "state_delta",
                        key: String::new(),
                    });
                    Scope::AppState { app: m.app_name, write }
                })
            }),
            (ARTIFACTS, "SaveArtifact", |b| {
                decode::<pb::SaveArtifactRequest>(b).map(|m| artifact_ref(m.r#ref.as_ref()))
            }),
            (ARTIFACTS, "LoadArtifact", |b| {
                decode::<pb::LoadArtifactRequest>(b).map(|m| artifact_ref(m.r#ref.as_ref()))
            }),
            (ARTIFACTS, "DeleteArtifact", |b| {
                decode::<pb::DeleteArtifactRequest>(b).map(|m| artifact_ref(m.r#ref.as_ref()))
            }),
            (ARTIFACTS, "ListArtifacts", |b| {
                decode::<pb::ListArtifactsRequest>(b).map(|m| user(&m.app_name, &m.user_id))
            }),
            (ARTIFACTS, "ListVersions", |b| {
                decode::<pb::ListVersionsRequest>(b).map(|m| artifact_ref(m.r#ref.as_ref()))
            }),
            (ARTIFACTS, "GetArtifactMetadata", |b| {
                decode::<pb::GetArtifactMetadataRequest>(b).map(|m| artifact_ref(m.r#ref.as_ref()))
            }),
            // The header is the first message (the handler refuses a header anywhere
            // else); every later message is a chunk of the same artifact.
            (ARTIFACTS, "UploadArtifact", |b| {
                use pb::upload_artifact_request::Message as Upload;
                match decode::<pb::UploadArtifactRequest>(b)?.message {
                    Some(Upload::Header(header)) => Ok(artifact_ref(header.r#ref.as_ref())),
                    _ => Err(Status::from(AdkError::invalid_with(
                        "header",
                        "the first upload message must be the header",
                    ))),
                }
            }),
            (ARTIFACTS, "DownloadArtifact", |b| {
                decode::<pb::DownloadArtifactRequest>(b).map(|m| artifact_ref(m.r#ref.as_ref()))
            }),
            (RUNNER, "Run", |b| {
                decode::<pb::RunRequest>(b).map(|m| {
                    // A client tool's answer writes state as the run's own state_delta does.
                    let answers = m.new_message.iter().flat_map(|message| message.parts.iter());
                    let tool_keys = answers
                        .filter_map(|part| match &part.kind {
                            Some(pb::part::Kind::FunctionResponse(response)) => response.actions.as_ref(),
                            _ => None,
                        })
                        .flat_map(|actions| actions.state_delta.keys());
                    let app_state = app_state_write("state_delta", m.state_delta.keys())
                        .or_else(|| app_state_write("new_message.function_response.actions.state_delta", tool_keys));
                    user_writing(&m.app_name, &m.user_id, app_state)
                })
            }),
            (RUNNER, "ListApps", |b| {
                decode::<pb::ListAppsRequest>(b).map(|_| Scope::Nothing)
            }),
            (RUNNER, "GetApp", |b| {
                decode::<pb::GetAppRequest>(b).map(|m| Scope::App(m.app_name))
            }),
            (RUNNER, "Cancel", |b| {
                decode::<pb::CancelRequest>(b).map(|m| user(&m.app_name, &m.user_id))
            }),
            (RUNNER, "Rewind", |b| {
                decode::<pb::RewindRequest>(b).map(|m| user(&m.app_name, &m.user_id))
            }),
            (SESSIONS, "ForkSession", |b| {
                decode::<pb::ForkSessionRequest>(b).map(|m| user(&m.app_name, &m.user_id))
            }),
            // Memories are one user's data, like their sessions.
            (MEMORY, "AddSessionToMemory", |b| {
                decode::<pb::AddSessionToMemoryRequest>(b).map(|m| user(&m.app_name, &m.user_id))
            }),
            (MEMORY, "AddEventsToMemory", |b| {
                decode::<pb::AddEventsToMemoryRequest>(b).map(|m| user(&m.app_name, &m.user_id))
            }),
            (MEMORY, "AddMemory", |b| {
                decode::<pb::AddMemoryRequest>(b).map(|m| user(&m.app_name, &m.user_id))
            }),
            (MEMORY, "SearchMemory", |b| {
                decode::<pb::SearchMemoryRequest>(b).map(|m| user(&m.app_name, &m.user_id))
            }),
            (MEMORY, "DeleteMemory", |b| {
                decode::<pb::DeleteMemoryRequest>(b).map(|m| user(&m.app_name, &m.user_id))
            }),
            (MEMORY, "GenerateMemories", |b| {
                decode::<pb::GenerateMemoriesRequest>(b).map(|m| user(&m.app_name, &m.user_id))
            }),
            (MEMORY, "ListMemoryRevisions", |b| {
                decode::<pb::ListMemoryRevisionsRequest>(b).map(|m| user(&m.app_name, &m.user_id))
            }),
            (MEMORY, "IngestEvents", |b| {
                decode::<pb::IngestEventsRequest>(b).map(|m| user(&m.app_name, &m.user_id))
            }),
            (A2A, "SendMessage", |b| {
                decode::<a2a::SendMessageRequest>(b).map(|m| Scope::App(m.tenant))
            }),
            (A2A, "SendStreamingMessage", |b| {
                decode::<a2a::SendMessageRequest>(b).map(|m| Scope::App(m.tenant))
            }),
            (A2A, "GetTask", |b| {
                decode::<a2a::GetTaskRequest>(b).map(|m| Scope::App(m.tenant))
            }),
            (A2A, "ListTasks", |b| {
                decode::<a2a::ListTasksRequest>(b).map(|m| Scope::App(m.tenant))
            }),
            (A2A, "CancelTask", |b| {
                decode::<a2a::CancelTaskRequest>(b).map(|m| Scope::App(m.tenant))
            }),
            (A2A, "SubscribeToTask", |b| {
                decode::<a2a::SubscribeToTaskRequest>(b).map(|m| Scope::App(m.tenant))
            }),
            (A2A, "CreateTaskPushNotificationConfig", |b| {
                decode::<a2a::TaskPushNotificationConfig>(b).map(|m| Scope::App(m.tenant))
            }),
            (A2A, "GetTaskPushNotificationConfig", |b| {
                decode::<a2a::GetTaskPushNotificationConfigRequest>(b).map(|m| Scope::App(m.tenant))
            }),
            (A2A, "ListTaskPushNotificationConfigs", |b| {
                decode::<a2a::ListTaskPushNotificationConfigsRequest>(b).map(|m| Scope::App(m.tenant))
            }),
            (A2A, "DeleteTaskPushNotificationConfig", |b| {
                decode::<a2a::DeleteTaskPushNotificationConfigRequest>(b).map(|m| Scope::App(m.tenant))
            }),
            (A2A, "GetExtendedAgentCard", |b| {
                decode::<a2a::GetExtendedAgentCardRequest>(b).map(|m| Scope::App(m.tenant))
            }),
        ];
        let methods = entries
            .into_iter()
            .map(|(service, method, extract)| (format!("/{service}/{method}"), extract))
            .collect();
        ScopeTable { methods }
    }

    /// How to read the scope of the method at `path`; None for a method this table does not know.
    pub(crate) fn extractor(&self, path: &str) -> Option<Extract> {
        if let Some(extract) = self.methods.get(path) {
            return Some(*extract);
        }
        let service = path.strip_prefix('/')?.split_once('/')?.0;
        // Health and reflection, when they are not public: any valid credential.
        if service == "grpc.health.v1.Health" || service.starts_with("grpc.reflection.") {
            return Some(|_| Ok(Scope::Nothing));
        }
        None
    }
}

/// Ok when `principal` may do what `scope` touches; PERMISSION_DENIED saying why otherwise.
pub(crate) fn authorize(principal: &Principal, scope: &Scope) -> Result<(), Status> {
    let app = match scope {
        Scope::Nothing => return Ok(()),
        Scope::App(app) | Scope::AppWide(app) | Scope::User { app, .. } | Scope::AppState { app, .. } => app,
    };
    if !principal.apps.allows(app) {
        return Err(Status::from(AdkError::PermissionDenied(format!(
            "the credential does not grant app {app:?}"
        ))));
    }
    match (&principal.subject, scope) {
        (Subject::Admin, _) | (_, Scope::App(_)) | (_, Scope::Nothing) => Ok(()),
        // App state is shared by every user: a user credential may read it, not write it.
        // (Agents in the runner write it through the store, not through this layer.)
        (
            Subject::User(own),
            Scope::User {
                user,
                app_state: Some(write),
                ..
            },
        ) if own == user => Err(app_state_denied(own, write)),
        (Subject::User(own), Scope::AppState { write, .. }) => Err(app_state_denied(own, write)),
        (Subject::User(own), Scope::User { user, .. }) if own == user => Ok(()),
        (Subject::User(own), Scope::User { .. }) => Err(Status::from(AdkError::PermissionDenied(format!(
            "the credential of user {own:?} may only touch that user's data"
        )))),
        (Subject::User(own), Scope::AppWide(_)) => Err(Status::from(AdkError::PermissionDenied(format!(
            "the credential of user {own:?} may not list every user's sessions: set user_id to {own:?}"
        )))),
    }
}

fn app_state_denied(own: &str, write: &AppStateWrite) -> Status {
    Status::from(AdkError::PermissionDenied(format!(
        "the credential of user {own:?} may not write app-wide state: {} key {:?} is shared by every user \
         of the app; only an admin credential may write app: keys",
        write.field, write.key
    )))
}

#[cfg(test)]
mod tests {
    use super::super::Apps;
    use super::*;
    use tonic::Code;

    /// A request of `method` touching `user`'s data in app "support" (ListApps touches nothing).
    fn sample(method: &str, user: &str) -> Vec<u8> {
        let app = "support".to_string();
        let user = user.to_string();
        let reference = Some(pb::ArtifactRef {
            app_name: app.clone(),
            user_id: user.clone(),
            session_id: "s".into(),
            file_name: "f".into(),
        });
        match method {
            "CreateSession" => pb::CreateSessionRequest {
                app_name: app,
                user_id: user,
                ..Default::default()
            }
            .encode_to_vec(),
            "GetSession" => pb::GetSessionRequest {
                app_name: app,
                user_id: user,
                ..Default::default()
            }
            .encode_to_vec(),
            "ListSessions" => pb::ListSessionsRequest {
                app_name: app,
                user_id: user,
                ..Default::default()
            }
            .encode_to_vec(),
            "DeleteSession" => pb::DeleteSessionRequest {
                app_name: app,
                user_id: user,
                ..Default::default()
            }
            .encode_to_vec(),
            "AppendEvent" => pb::AppendEventRequest {
                app_name: app,
                user_id: user,
                ..Default::default()
            }
            .encode_to_vec(),
            "ListEvents" => pb::ListEventsRequest {
                app_name: app,
                user_id: user,
                ..Default::default()
            }
            .encode_to_vec(),
            "WatchSession" => pb::WatchSessionRequest {
                app_name: app,
                user_id: user,
                ..Default::default()
            }
            .encode_to_vec(),
            "SaveArtifact" => pb::SaveArtifactRequest {
                r#ref: reference,
                ..Default::default()
            }
            .encode_to_vec(),
            "LoadArtifact" => pb::LoadArtifactRequest {
                r#ref: reference,
                ..Default::default()
            }
            .encode_to_vec(),
            "DeleteArtifact" => pb::DeleteArtifactRequest {
                r#ref: reference,
                ..Default::default()
            }
            .encode_to_vec(),
            "ListArtifacts" => pb::ListArtifactsRequest {
                app_name: app,
                user_id: user,
                ..Default::default()
            }
            .encode_to_vec(),
            "ListVersions" => pb::ListVersionsRequest { r#ref: reference }.encode_to_vec(),
            "GetArtifactMetadata" => pb::GetArtifactMetadataRequest {
                r#ref: reference,
                ..Default::default()
            }
            .encode_to_vec(),
            "UploadArtifact" => pb::UploadArtifactRequest {
                message: Some(pb::upload_artifact_request::Message::Header(pb::UploadHeader {
                    r#ref: reference,
                    ..Default::default()
                })),
            }
            .encode_to_vec(),
            "DownloadArtifact" => pb::DownloadArtifactRequest {
                r#ref: reference,
                ..Default::default()
            }
            .encode_to_vec(),
            "Run" => pb::RunRequest {
                app_name: app,
                user_id: user,
                ..Default::default()
            }
            .encode_to_vec(),
            "Cancel" => pb::CancelRequest {
                app_name: app,
                user_id: user,
                ..Default::default()
            }
            .encode_to_vec(),
            "Rewind" => pb::RewindRequest {
                app_name: app,
                user_id: user,
                ..Default::default()
            }
            .encode_to_vec(),
            "ForkSession" => pb::ForkSessionRequest {
                app_name: app,
                user_id: user,
                ..Default::default()
            }
            .encode_to_vec(),
            "GetApp" => pb::GetAppRequest { app_name: app }.encode_to_vec(),
            "GetUserState" => pb::GetUserStateRequest {
                app_name: app,
                user_id: user,
            }
            .encode_to_vec(),
            "GetAppState" => pb::GetAppStateRequest { app_name: app }.encode_to_vec(),
            "UpdateAppState" => pb::UpdateAppStateRequest {
                app_name: app,
                state_delta: Some(adk_grpc_proto::ordered::Struct::from([(
                    "app:k".to_string(),
                    adk_grpc_proto::ordered::Value::default(),
                )])),
            }
            .encode_to_vec(),
            "ListApps" => pb::ListAppsRequest {}.encode_to_vec(),
            "AddSessionToMemory" => pb::AddSessionToMemoryRequest {
                app_name: app,
                user_id: user,
                ..Default::default()
            }
            .encode_to_vec(),
            "AddEventsToMemory" => pb::AddEventsToMemoryRequest {
                app_name: app,
                user_id: user,
                ..Default::default()
            }
            .encode_to_vec(),
            "AddMemory" => pb::AddMemoryRequest {
                app_name: app,
                user_id: user,
                ..Default::default()
            }
            .encode_to_vec(),
            "SearchMemory" => pb::SearchMemoryRequest {
                app_name: app,
                user_id: user,
                ..Default::default()
            }
            .encode_to_vec(),
            "DeleteMemory" => pb::DeleteMemoryRequest {
                app_name: app,
                user_id: user,
                ..Default::default()
            }
            .encode_to_vec(),
            "GenerateMemories" => pb::GenerateMemoriesRequest {
                app_name: app,
                user_id: user,
                ..Default::default()
            }
            .encode_to_vec(),
            "ListMemoryRevisions" => pb::ListMemoryRevisionsRequest {
                app_name: app,
                user_id: user,
                ..Default::default()
            }
            .encode_to_vec(),
            "IngestEvents" => pb::IngestEventsRequest {
                app_name: app,
                user_id: user,
                ..Default::default()
            }
            .encode_to_vec(),
            // A2A: the tenant is the app; the user is the credential's own.
            "SendMessage" | "SendStreamingMessage" => a2a::SendMessageRequest {
                tenant: app,
                ..Default::default()
            }
            .encode_to_vec(),
            "GetTask" => a2a::GetTaskRequest {
                tenant: app,
                ..Default::default()
            }
            .encode_to_vec(),
            "ListTasks" => a2a::ListTasksRequest {
                tenant: app,
                ..Default::default()
            }
            .encode_to_vec(),
            "CancelTask" => a2a::CancelTaskRequest {
                tenant: app,
                ..Default::default()
            }
            .encode_to_vec(),
            "SubscribeToTask" => a2a::SubscribeToTaskRequest {
                tenant: app,
                ..Default::default()
            }
            .encode_to_vec(),
            "CreateTaskPushNotificationConfig" => a2a::TaskPushNotificationConfig {
                tenant: app,
                ..Default::default()
            }
            .encode_to_vec(),
            "GetTaskPushNotificationConfig" => a2a::GetTaskPushNotificationConfigRequest {
                tenant: app,
                ..Default::default()
            }
            .encode_to_vec(),
            "ListTaskPushNotificationConfigs" => a2a::ListTaskPushNotificationConfigsRequest {
                tenant: app,
                ..Default::default()
            }
            .encode_to_vec(),
            "DeleteTaskPushNotificationConfig" => a2a::DeleteTaskPushNotificationConfigRequest {
                tenant: app,
                ..Default::default()
            }
            .encode_to_vec(),
            "GetExtendedAgentCard" => a2a::GetExtendedAgentCardRequest { tenant: app }.encode_to_vec(),
            other => panic!("method {other} has no sample here: add one, and its row in ScopeTable::new"),
        }
    }

    fn alice(apps: &[&str]) -> Principal {
        Principal {
            subject: Subject::User("alice".into()),
            apps: Apps::from_list(apps.iter().map(|app| app.to_string()).collect()),
        }
    }

    fn check(table: &ScopeTable, path: &str, bytes: &[u8], principal: &Principal) -> Result<(), Code> {
        let extract = table.extractor(path).ok_or(Code::Unimplemented)?;
        let scope = extract(bytes).map_err(|status| status.code())?;
        authorize(principal, &scope).map_err(|status| status.code())
    }

    /// Every method of every adk.v1 service, from the descriptor set the servers
    /// serve: each is in the table, lets alice touch her own data and refuses bob's
    /// data and other apps to her (only ListApps, GetApp and GetAppState touch no user's data).
    #[test]
    fn every_method_is_checked() {
        let table = ScopeTable::new();
        let set = prost_types::FileDescriptorSet::decode(adk_grpc_proto::FILE_DESCRIPTOR_SET).unwrap();
        let admin = Principal {
            subject: Subject::Admin,
            apps: Apps::Only(vec!["support".into()]),
        };
        let mut checked = 0;
        for file in &set.file {
            for service in &file.service {
                for method in &service.method {
                    let path = format!("/{}.{}/{}", file.package(), service.name(), method.name());
                    assert!(table.extractor(&path).is_some(), "{path} is not in the scope table");
                    let own = sample(method.name(), "alice");
                    let other = sample(method.name(), "bob");
                    // Writing app state is for admins alone, whoever's the call looks.
                    let alice_may = method.name() != "UpdateAppState";
                    let expected = if alice_may { Ok(()) } else { Err(Code::PermissionDenied) };
                    assert_eq!(check(&table, &path, &own, &alice(&["support"])), expected, "{path}");
                    assert_eq!(check(&table, &path, &other, &admin), Ok(()), "{path}");
                    match method.name() {
                        "ListApps" => {
                            assert_eq!(check(&table, &path, &other, &alice(&["other"])), Ok(()), "{path}")
                        }
                        // The app's state: any credential of the app reads it, as every
                        // session of the app shows it.
                        "UpdateAppState" => assert_eq!(
                            check(&table, &path, &own, &alice(&["*"])),
                            Err(Code::PermissionDenied),
                            "{path}: a user credential of every app"
                        ),
                        "GetApp" | "GetAppState" => assert_eq!(
                            check(&table, &path, &other, &alice(&["other"])),
                            Err(Code::PermissionDenied),
                            "{path}"
                        ),
                        // A2A requests name the app (tenant), never a user: another app is refused.
                        _ if file.package() == "lf.a2a.v1" => assert_eq!(
                            check(&table, &path, &other, &alice(&["other"])),
                            Err(Code::PermissionDenied),
                            "{path}"
                        ),
                        _ => {
                            assert_eq!(
                                check(&table, &path, &other, &alice(&["support"])),
                                Err(Code::PermissionDenied),
                                "{path}: bob's data"
                            );
                            assert_eq!(
                                check(&table, &path, &own, &alice(&["other"])),
                                Err(Code::PermissionDenied),
                                "{path}: another app"
                            );
                            assert_eq!(check(&table, &path, &own, &alice(&["*"])), Ok(()), "{path}: all apps");
                        }
                    }
                    checked += 1;
                }
            }
        }
        assert_eq!(
            checked, 43,
            "the adk.v1 services have 32 methods, lf.a2a.v1.A2AService 11"
        );
        assert!(table.extractor("/adk.v1.Nope/Nothing").is_none());
    }

    /// The three ways a client writes state (CreateSession `state`, AppendEvent
    /// `event.actions.state_delta`, Run `state_delta`): app: keys need an admin.
    #[test]
    fn only_admins_write_app_state() {
        let table = ScopeTable::new();
        let value = || adk_grpc_proto::ordered::Value {
            kind: Some(adk_grpc_proto::ordered::value::Kind::StringValue("hi".into())),
        };
        let keys = |key: &str| [(key.to_string(), value()), ("topic".to_string(), value())];
        let requests = |key: &str| {
            [
                (
                    "CreateSession",
                    "state",
                    pb::CreateSessionRequest {
                        app_name: "support".into(),
                        user_id: "alice".into(),
                        state: Some(adk_grpc_proto::ordered::Struct::from_iter(keys(key))),
                        ..Default::default()
                    }
                    .encode_to_vec(),
                ),
                (
                    "AppendEvent",
                    "event.actions.state_delta",
                    pb::AppendEventRequest {
                        app_name: "support".into(),
                        user_id: "alice".into(),
                        event: Some(pb::Event {
                            actions: Some(pb::EventActions {
                                state_delta: keys(key).into_iter().collect(),
                                ..Default::default()
                            }),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }
                    .encode_to_vec(),
                ),
                (
                    "Run",
                    "state_delta",
                    pb::RunRequest {
                        app_name: "support".into(),
                        user_id: "alice".into(),
                        state_delta: keys(key).into_iter().collect(),
                        ..Default::default()
                    }
                    .encode_to_vec(),
                ),
                (
                    "Run",
                    "new_message.function_response.actions.state_delta",
                    pb::RunRequest {
                        app_name: "support".into(),
                        user_id: "alice".into(),
                        new_message: Some(pb::Content {
                            role: "user".into(),
                            parts: vec![pb::Part {
                                kind: Some(pb::part::Kind::FunctionResponse(pb::FunctionResponse {
                                    name: "confirm".into(),
                                    actions: Some(pb::ToolActions {
                                        state_delta: keys(key).into_iter().collect(),
                                        ..Default::default()
                                    }),
                                    ..Default::default()
                                })),
                                ..Default::default()
                            }],
                        }),
                        ..Default::default()
                    }
                    .encode_to_vec(),
                ),
            ]
        };
        let admin = Principal {
            subject: Subject::Admin,
            apps: Apps::All,
        };
        let service = |method: &str| if method == "Run" { RUNNER } else { SESSIONS };
        for (method, field, bytes) in requests("app:banner") {
            let path = format!("/{}/{method}", service(method));
            let scope = table.extractor(&path).unwrap()(&bytes).unwrap();
            let status = authorize(&alice(&["support"]), &scope).unwrap_err();
            assert_eq!(status.code(), Code::PermissionDenied, "{method}");
            assert!(
                status.message().contains(field) && status.message().contains("\"app:banner\""),
                "{method}: {}",
                status.message()
            );
            assert_eq!(
                check(&table, &path, &bytes, &admin),
                Ok(()),
                "{method}: an admin writes app state"
            );
        }
        for key in ["user:lang", "temp:app:scratch", "applause"] {
            for (method, _, bytes) in requests(key) {
                let path = format!("/{}/{method}", service(method));
                assert_eq!(
                    check(&table, &path, &bytes, &alice(&["support"])),
                    Ok(()),
                    "{method} {key}"
                );
            }
        }
    }

    #[test]
    fn app_wide_listing_and_headerless_uploads_are_refused() {
        let table = ScopeTable::new();
        let path = format!("/{SESSIONS}/ListSessions");
        let all_users = sample("ListSessions", "");
        assert_eq!(
            check(&table, &path, &all_users, &alice(&["*"])),
            Err(Code::PermissionDenied)
        );
        let admin = Principal {
            subject: Subject::Admin,
            apps: Apps::All,
        };
        assert_eq!(check(&table, &path, &all_users, &admin), Ok(()));
        let chunk = pb::UploadArtifactRequest {
            message: Some(pb::upload_artifact_request::Message::Chunk(vec![1, 2, 3])),
        }
        .encode_to_vec();
        assert_eq!(
            check(&table, &format!("/{ARTIFACTS}/UploadArtifact"), &chunk, &admin),
            Err(Code::InvalidArgument)
        );
        assert_eq!(check(&table, &path, b"\xff\xff", &admin), Err(Code::InvalidArgument));
    }
}
