//! Instruction templating: `{key}` is replaced by the state value (a string as it is,
//! any other value as ADK's `str()` writes it), `{key?}` by the value or nothing, `{artifact.name}` by the artifact's text. Braces around
//! anything that is not a state key name (`{"json": 1}`, `{ not a key }`) stay as
//! written, so instructions may contain examples.

use adk_grpc_core::{
    AdkError, CallbackContext, KEY_PREFIX_APP, KEY_PREFIX_TEMP, KEY_PREFIX_USER, Part, PartKind, Result,
};
use serde_json::Value;

use crate::python_repr::python_repr;

const ARTIFACT_PREFIX: &str = "artifact.";

/// `template` with every placeholder resolved against the context's state and artifacts.
pub(crate) async fn render(template: &str, agent: &str, ctx: &dyn CallbackContext) -> Result<String> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let candidate = &rest[open..];
        let Some((whole, name)) = placeholder(candidate) else {
            // Not a placeholder: keep this brace and look further.
            out.push('{');
            rest = &candidate[1..];
            continue;
        };
        match resolve(name, agent, ctx).await? {
            Some(value) => out.push_str(&value),
            None => out.push_str(&candidate[..whole]),
        }
        rest = &candidate[whole..];
    }
    out.push_str(rest);
    Ok(out)
}

/// At a `{`: the length of `{{…name…}}` and the trimmed name inside, when the
/// braces close before another one opens.
fn placeholder(text: &str) -> Option<(usize, &str)> {
    let inner_start = text.len() - text.trim_start_matches('{').len();
    let inner_len = text[inner_start..].find(['{', '}'])?;
    let close = inner_start + inner_len;
    if !text[close..].starts_with('}') {
        return None;
    }
    let after = &text[close..];
    let closing = after.len() - after.trim_start_matches('}').len();
    Some((close + closing, text[inner_start..close].trim()))
}

/// The text for one placeholder; None leaves it as written.
async fn resolve(name: &str, agent: &str, ctx: &dyn CallbackContext) -> Result<Option<String>> {
    let (name, optional) = match name.strip_suffix('?') {
        Some(name) => (name, true),
        None => (name, false),
    };
    if let Some(file) = name.strip_prefix(ARTIFACT_PREFIX) {
        return artifact_text(file, optional, agent, ctx).await.map(Some);
    }
    if !is_state_key(name) {
        return Ok(None);
    }
    match ctx.state().get(name) {
        Some(Value::String(text)) => Ok(Some(text)),
        // ADK writes `str(value)`: Python's repr of a dict or list (`{'n': 1}`, `None`).
        Some(value) => Ok(Some(python_repr(&value))),
        None if optional => Ok(Some(String::new())),
        None => Err(AdkError::FailedPrecondition(format!(
            "instruction of agent {agent} uses state key `{name}`, which is not set; \
             set it, or write `{{{name}?}}` to make it optional"
        ))),
    }
}

async fn artifact_text(file: &str, optional: bool, agent: &str, ctx: &dyn CallbackContext) -> Result<String> {
    let missing = |why: String| {
        if optional {
            Ok(String::new())
        } else {
            Err(AdkError::FailedPrecondition(format!(
                "instruction of agent {agent} uses artifact `{file}`: {why}"
            )))
        }
    };
    let Some(artifacts) = ctx.artifacts() else {
        return missing("the runner has no artifact service".into());
    };
    match artifacts.load(file).await {
        Ok(Part {
            kind: PartKind::Text { text },
            ..
        }) => Ok(text),
        Ok(Part {
            kind: PartKind::InlineData { mime_type, data },
            ..
        }) if mime_type.starts_with("text/") => Ok(String::from_utf8_lossy(&data).into_owned()),
        Ok(_) => missing("it is not text".into()),
        Err(AdkError::NotFound(..)) => missing("it does not exist".into()),
        Err(e) => Err(e),
    }
}

/// `name`, `app:name`, `user:name` or `temp:name`, where name is an identifier.
fn is_state_key(key: &str) -> bool {
    let name = [KEY_PREFIX_APP, KEY_PREFIX_USER, KEY_PREFIX_TEMP]
        .iter()
        .find_map(|prefix| key.strip_prefix(prefix))
        .unwrap_or(key);
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;
    use adk_grpc_core::{Artifacts, Content, ReadonlyContext, ReadonlyState, StateMap};
    use async_trait::async_trait;
    use serde_json::json;
    use std::collections::HashMap;
    use std::sync::Arc;

    struct Ctx {
        state: StateMap,
        artifacts: Option<Arc<dyn Artifacts>>,
        content: Content,
    }

    impl ReadonlyContext for Ctx {
        fn invocation_id(&self) -> &str {
            "i"
        }
        fn agent_name(&self) -> &str {
            "a"
        }
        fn user_id(&self) -> &str {
            "u"
        }
        fn app_name(&self) -> &str {
            "app"
        }
        fn session_id(&self) -> &str {
            "s"
        }
        fn user_content(&self) -> &Content {
            &self.content
        }
        fn state(&self) -> &dyn ReadonlyState {
            &self.state
        }
    }

    impl CallbackContext for Ctx {
        fn artifacts(&self) -> Option<Arc<dyn Artifacts>> {
            self.artifacts.clone()
        }
    }

    struct OneArtifact;

    #[async_trait]
    impl Artifacts for OneArtifact {
        async fn save(&self, _: &str, _: &Part) -> Result<i64> {
            Ok(1)
        }
        async fn load_version(&self, name: &str, _: Option<i64>) -> Result<Part> {
            match name {
                "notes.txt" => Ok(Part::text_part("remember the milk")),
                _ => Err(AdkError::NotFound(
                    adk_grpc_core::Missing::Artifact,
                    format!("artifact {name} not found"),
                )),
            }
        }
        async fn list(&self) -> Result<Vec<String>> {
            Ok(vec!["notes.txt".into()])
        }
    }

    fn ctx() -> Ctx {
        let state: HashMap<String, Value> = [
            ("name", json!("Ada")),
            ("user:lang", json!("en")),
            ("app:tier", json!(3)),
            ("temp:step", json!({"n": 1})),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        Ctx {
            state: state.into(),
            artifacts: Some(Arc::new(OneArtifact)),
            content: Content::new("user"),
        }
    }

    #[tokio::test]
    async fn placeholders_resolve_from_every_scope_and_artifacts() {
        let out = render(
            "Hi {name} ({user:lang}, tier {app:tier}, step {temp:step}){missing?}. Notes: {artifact.notes.txt}{ artifact.none? }",
            "a",
            &ctx(),
        )
        .await
        .unwrap();
        assert_eq!(out, r#"Hi Ada (en, tier 3, step {'n': 1}). Notes: remember the milk"#);
    }

    #[tokio::test]
    async fn non_keys_stay_as_written() {
        let text = r#"Reply as {"answer": 1} or { two words } or {{name}} {"#;
        let out = render(text, "a", &ctx()).await.unwrap();
        assert_eq!(out, r#"Reply as {"answer": 1} or { two words } or Ada {"#);
    }

    #[tokio::test]
    async fn a_missing_key_or_artifact_is_an_error_naming_it() {
        let err = render("x {topic} y", "helper", &ctx()).await.unwrap_err();
        assert!(
            err.to_string().contains("`topic`") && err.to_string().contains("helper"),
            "{err}"
        );
        let err = render("{artifact.gone.txt}", "helper", &ctx()).await.unwrap_err();
        assert!(err.to_string().contains("gone.txt"), "{err}");
        let mut no_service = ctx();
        no_service.artifacts = None;
        let err = render("{artifact.notes.txt}", "a", &no_service).await.unwrap_err();
        assert!(err.to_string().contains("no artifact service"), "{err}");
    }
}
