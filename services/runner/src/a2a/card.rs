//! The agent card of an app: served by GetExtendedAgentCard and over HTTP at
//! `/.well-known/agent-card.json` (the only app) and `/<app>/.well-known/agent-card.json`.

use crate::app::{AgentDescription, App};
use adk_grpc_proto::a2a;
use prost::Message;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// What a card says beyond the app: where clients reach the gRPC port, and whether
/// they need a bearer token.
#[derive(Debug, Clone, Default)]
pub struct CardArgs {
    /// `host:port` of the gRPC port as clients reach it.
    pub url: String,
    pub bearer_required: bool,
    /// How long SendMessage (unless `return_immediately`) and CancelTask wait for a run's
    /// outcome before they answer DEADLINE_EXCEEDED (the run goes on).
    pub wait: std::time::Duration,
}

/// The A2A agent card of `app`: its root agent's name and description, one skill per
/// agent of its tree (tagged with the agent's kind and naming its tools), streaming
/// on, push notifications off, one gRPC interface whose tenant is the app, and the
/// bearer scheme when `--auth required`.
pub fn agent_card(app: &App, args: &CardArgs) -> a2a::AgentCard {
    let root = app.root_agent();
    let mut skills = Vec::new();
    collect_skills(root, &mut skills);
    let (security_schemes, security_requirements) = if args.bearer_required {
        let scheme = a2a::SecurityScheme {
            scheme: Some(a2a::security_scheme::Scheme::HttpAuthSecurityScheme(
                a2a::HttpAuthSecurityScheme {
                    description: "authorization: Bearer <API key or JWT>, as every RPC of this server".into(),
                    scheme: "Bearer".into(),
                    bearer_format: "API key or JWT".into(),
                },
            )),
        };
        let requirement = a2a::SecurityRequirement {
            schemes: HashMap::from([("bearer".to_string(), a2a::StringList::default())]),
        };
        (HashMap::from([("bearer".to_string(), scheme)]), vec![requirement])
    } else {
        (HashMap::new(), Vec::new())
    };
    let description = match root.description.as_str() {
        "" => format!("The {} app's agents", app.name()),
        given => given.to_string(),
    };
    a2a::AgentCard {
        name: app.name().to_string(),
        description,
        supported_interfaces: vec![a2a::AgentInterface {
            url: args.url.clone(),
            protocol_binding: "GRPC".into(),
            tenant: app.name().to_string(),
            protocol_version: "1.0".into(),
        }],
        provider: None,
        version: env!("CARGO_PKG_VERSION").to_string(),
        documentation_url: None,
        capabilities: Some(a2a::AgentCapabilities {
            streaming: Some(true),
            push_notifications: Some(false),
            extensions: Vec::new(),
            extended_agent_card: Some(true),
        }),
        security_schemes,
        security_requirements,
        default_input_modes: vec!["text/plain".into(), "application/json".into()],
        default_output_modes: vec!["text/plain".into(), "application/json".into()],
        skills,
        signatures: Vec::new(),
        icon_url: None,
    }
}

fn collect_skills(agent: &AgentDescription, skills: &mut Vec<a2a::AgentSkill>) {
    let tools: Vec<String> = agent.tools.iter().map(|tool| tool.name.clone()).collect();
    let mut description = agent.description.clone();
    if !tools.is_empty() {
        description = format!("{description} (tools: {})", tools.join(", "))
            .trim()
            .to_string();
    }
    skills.push(a2a::AgentSkill {
        id: agent.name.clone(),
        name: agent.name.clone(),
        description,
        tags: std::iter::once(agent.kind.clone()).chain(tools).collect(),
        ..Default::default()
    });
    for sub in &agent.sub_agents {
        collect_skills(sub, skills);
    }
}

/// The HTTP routes serving the apps' cards as JSON (the A2A JSON form of the
/// message: camelCase field names, as the specification's JSON binding).
pub fn card_routes(apps: &[App], args: &CardArgs) -> axum::Router {
    let cards: Arc<BTreeMap<String, String>> = Arc::new(
        apps.iter()
            .map(|app| (app.name().to_string(), card_json(&agent_card(app, args))))
            .collect(),
    );
    let only = (cards.len() == 1).then(|| cards.values().next().cloned()).flatten();
    let listing = cards
        .keys()
        .map(|name| format!("/{name}/.well-known/agent-card.json"))
        .collect::<Vec<_>>();
    let by_app = cards.clone();
    axum::Router::new()
        .route(
            "/.well-known/agent-card.json",
            axum::routing::get(move || {
                let only = only.clone();
                let listing = listing.clone();
                async move {
                    match only {
                        Some(card) => json_response(card),
                        None => (
                            axum::http::StatusCode::NOT_FOUND,
                            format!("several apps are served: their cards are at {}", listing.join(", ")),
                        )
                            .into_response(),
                    }
                }
            }),
        )
        .route(
            "/{app}/.well-known/agent-card.json",
            axum::routing::get(move |axum::extract::Path(app): axum::extract::Path<String>| {
                let card = by_app.get(&app).cloned();
                async move {
                    match card {
                        Some(card) => json_response(card),
                        None => (
                            axum::http::StatusCode::NOT_FOUND,
                            format!("no app {app:?} is served here"),
                        )
                            .into_response(),
                    }
                }
            }),
        )
}

use axum::response::IntoResponse;

fn json_response(card: String) -> axum::response::Response {
    ([(axum::http::header::CONTENT_TYPE, "application/json")], card).into_response()
}

/// The card in the protobuf JSON mapping (lowerCamelCase names, enums by name), which
/// is the A2A JSON form; written from the message's own encoding through serde_json.
pub fn card_json(card: &a2a::AgentCard) -> String {
    let _ = card.encoded_len();
    serde_json::to_string_pretty(&card_to_json(card)).unwrap_or_default()
}

fn card_to_json(card: &a2a::AgentCard) -> serde_json::Value {
    use serde_json::json;
    let interfaces: Vec<_> = card
        .supported_interfaces
        .iter()
        .map(|i| json!({"url": i.url, "protocolBinding": i.protocol_binding, "tenant": i.tenant, "protocolVersion": i.protocol_version}))
        .collect();
    let skills: Vec<_> = card
        .skills
        .iter()
        .map(|s| json!({"id": s.id, "name": s.name, "description": s.description, "tags": s.tags}))
        .collect();
    let mut schemes = serde_json::Map::new();
    for (name, scheme) in &card.security_schemes {
        if let Some(a2a::security_scheme::Scheme::HttpAuthSecurityScheme(http)) = &scheme.scheme {
            schemes.insert(
                name.clone(),
                json!({"httpAuthSecurityScheme": {"description": http.description, "scheme": http.scheme, "bearerFormat": http.bearer_format}}),
            );
        }
    }
    let requirements: Vec<_> = card
        .security_requirements
        .iter()
        .map(|r| {
            let schemes: serde_json::Map<String, serde_json::Value> = r
                .schemes
                .iter()
                .map(|(k, v)| (k.clone(), json!({"list": v.list})))
                .collect();
            json!({"schemes": schemes})
        })
        .collect();
    let capabilities = card.capabilities.clone().unwrap_or_default();
    json!({
        "name": card.name,
        "description": card.description,
        "supportedInterfaces": interfaces,
        "version": card.version,
        "capabilities": {
            "streaming": capabilities.streaming.unwrap_or(false),
            "pushNotifications": capabilities.push_notifications.unwrap_or(false),
            "extendedAgentCard": capabilities.extended_agent_card.unwrap_or(false),
        },
        "securitySchemes": schemes,
        "securityRequirements": requirements,
        "defaultInputModes": card.default_input_modes,
        "defaultOutputModes": card.default_output_modes,
        "skills": skills,
    })
}

/// The A2A settings of a server binary.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct A2aArgs {
    /// Where A2A clients reach this server's gRPC port (host:port), as the agent cards say; default: the
    /// --listen address, with 127.0.0.1 for an unspecified host (0.0.0.0 / [::])
    #[arg(long, env = "ADK_A2A_URL", value_name = "HOST:PORT")]
    pub a2a_url: Option<String>,
    /// How long A2A SendMessage (unless return_immediately) and CancelTask wait for the run's
    /// outcome; after it they answer DEADLINE_EXCEEDED and the run goes on (GetTask and
    /// SubscribeToTask follow it)
    #[arg(long, env = "ADK_A2A_WAIT_SECS", value_name = "SECONDS", default_value_t = 300,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub a2a_wait_secs: u64,
}

impl A2aArgs {
    /// What the cards say, for a server listening on `listen` with `grpc`'s auth settings.
    pub fn card_args(&self, listen: &str, grpc: &adk_grpc_server_kit::GrpcArgs) -> CardArgs {
        let url = self.a2a_url.clone().unwrap_or_else(|| match listen.rsplit_once(':') {
            Some(("0.0.0.0" | "[::]" | "", port)) => format!("127.0.0.1:{port}"),
            _ => listen.to_string(),
        });
        CardArgs {
            url,
            bearer_required: grpc.auth.auth == adk_grpc_server_kit::AuthMode::Required,
            wait: std::time::Duration::from_secs(self.a2a_wait_secs),
        }
    }
}
