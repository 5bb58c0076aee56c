//! The declared hooks: checked field by field, then built once with the runner
//! library's constructor and shared by every app and agent that lists them (each
//! holds a connection pool).

use super::file::{AgentsFile, HookConfig};
use super::problems::{Problems, library_message};
use adk_grpc_agents::{ContextGrant, HttpHook};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

pub(super) fn build_hooks(spec: &AgentsFile, problems: &mut Problems) -> BTreeMap<String, Arc<HttpHook>> {
    let mut hooks = BTreeMap::new();
    for (name, config) in &spec.hooks {
        if let Some(hook) = build_hook(name, config, problems) {
            hooks.insert(name.clone(), Arc::new(hook));
        }
    }
    hooks
}

fn build_hook(name: &str, config: &HookConfig, problems: &mut Problems) -> Option<HttpHook> {
    let place = format!("hook {name:?}");
    let before = problems.0.len();
    // Hook names are metric labels and name the hook in every error: the tool names' rule.
    if !adk_grpc_agents::is_tool_name(name) {
        problems.add(
            &place,
            None,
            format!(
                "a hook name is 1-{} characters of [A-Za-z0-9_-], starting with a letter or _",
                adk_grpc_agents::MAX_TOOL_NAME_CHARS
            ),
        );
    }
    if config.points.is_empty() {
        problems.add(
            &place,
            Some("points"),
            "name the points the hook is called at: before_agent, after_agent, before_model, after_model, \
             before_tool, after_tool, on_model_error, on_tool_error",
        );
    }
    if config.timeout_secs == Some(0) {
        problems.add(&place, Some("timeout_secs"), "must be at least 1");
    }
    let mut headers = Vec::new();
    for (header, var) in &config.headers_from_env {
        match std::env::var(var) {
            Ok(value) if !value.is_empty() => headers.push((header, value)),
            _ => problems.add(
                &place,
                Some("headers_from_env"),
                format!("environment variable {var} (for header {header}) is not set"),
            ),
        }
    }
    let grant = config
        .context
        .as_ref()
        .map(|context| {
            ContextGrant::new(context.state.iter().cloned())
                .map(|grant| grant.with_session_reads(context.session_reads))
        })
        .transpose()
        .inspect_err(|e| problems.add(&place, Some("context.state"), library_message(e)))
        .ok()
        .flatten();
    if problems.0.len() > before {
        return None;
    }
    // With points given, the library refuses only the URL.
    let mut hook = HttpHook::new(name, &config.url, config.points.iter().copied())
        .inspect_err(|e| problems.add(&place, Some("url"), library_message(e)))
        .ok()?
        .on_failure(config.on_failure);
    if let Some(secs) = config.timeout_secs {
        hook = hook.with_timeout(Duration::from_secs(secs));
    }
    for (header, value) in &headers {
        hook = hook
            .with_header(header, value)
            .inspect_err(|e| problems.add(&place, Some("headers_from_env"), library_message(e)))
            .ok()?;
    }
    if let Some(grant) = grant {
        hook = hook.with_context(grant);
    }
    Some(hook)
}
