//! Session state and its scopes, chosen by key prefix.

use serde_json::Value;
use std::collections::HashMap;

/// Shared by every user and session of the app.
pub const KEY_PREFIX_APP: &str = "app:";
/// Shared by every session of one user in one app.
pub const KEY_PREFIX_USER: &str = "user:";
/// Lives for one invocation and is never stored.
pub const KEY_PREFIX_TEMP: &str = "temp:";

/// Read access to state.
pub trait ReadonlyState: Send + Sync {
    fn get(&self, key: &str) -> Option<Value>;
    fn all(&self) -> HashMap<String, Value>;
}

/// Read and write access to state.
pub trait State: ReadonlyState {
    fn set(&mut self, key: String, value: Value);
}

/// Where a state key lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    App,
    User,
    Temp,
    Session,
}

impl Scope {
    /// The key's scope and its name within that scope (the key without its prefix).
    pub fn of(key: &str) -> (Scope, &str) {
        for (prefix, scope) in [
            (KEY_PREFIX_APP, Scope::App),
            (KEY_PREFIX_USER, Scope::User),
            (KEY_PREFIX_TEMP, Scope::Temp),
        ] {
            if let Some(name) = key.strip_prefix(prefix) {
                return (scope, name);
            }
        }
        (Scope::Session, key)
    }
}

/// A state map: the merged view of a session's state, keys keeping their prefixes.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StateMap(HashMap<String, Value>);

impl StateMap {
    pub fn new(map: HashMap<String, Value>) -> Self {
        StateMap(map)
    }

    pub fn into_inner(self) -> HashMap<String, Value> {
        self.0
    }

    pub fn as_map(&self) -> &HashMap<String, Value> {
        &self.0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &Value)> {
        self.0.iter()
    }
}

impl ReadonlyState for StateMap {
    fn get(&self, key: &str) -> Option<Value> {
        self.0.get(key).cloned()
    }

    fn all(&self) -> HashMap<String, Value> {
        self.0.clone()
    }
}

impl State for StateMap {
    fn set(&mut self, key: String, value: Value) {
        self.0.insert(key, value);
    }
}

impl From<HashMap<String, Value>> for StateMap {
    fn from(map: HashMap<String, Value>) -> Self {
        StateMap(map)
    }
}

/// A state delta split by scope. Keys are stored without their scope prefix;
/// `temp:` keys are gone.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ScopedDelta {
    pub app: HashMap<String, Value>,
    pub user: HashMap<String, Value>,
    pub session: HashMap<String, Value>,
}

impl ScopedDelta {
    pub fn split(delta: &HashMap<String, Value>) -> Self {
        let mut scoped = ScopedDelta::default();
        for (key, value) in delta {
            let (scope, name) = Scope::of(key);
            let target = match scope {
                Scope::App => &mut scoped.app,
                Scope::User => &mut scoped.user,
                Scope::Session => &mut scoped.session,
                Scope::Temp => continue,
            };
            target.insert(name.to_string(), value.clone());
        }
        scoped
    }

    pub fn is_empty(&self) -> bool {
        self.app.is_empty() && self.user.is_empty() && self.session.is_empty()
    }
}

/// The merged view app -> user -> session; app and user keys get their prefix back.
pub fn merge_state(
    app: impl IntoIterator<Item = (String, Value)>,
    user: impl IntoIterator<Item = (String, Value)>,
    session: impl IntoIterator<Item = (String, Value)>,
) -> StateMap {
    let mut merged: HashMap<String, Value> = app
        .into_iter()
        .map(|(k, v)| (format!("{KEY_PREFIX_APP}{k}"), v))
        .collect();
    merged.extend(user.into_iter().map(|(k, v)| (format!("{KEY_PREFIX_USER}{k}"), v)));
    merged.extend(session);
    StateMap(merged)
}

/// The first (in sorted order, so the answer is the same every time) of `keys` that
/// is app-scoped: shared by every user of the app. Only admin credentials may write
/// such keys from a client (the server kit's authorization layer asks this).
pub fn first_app_key<'a>(keys: impl IntoIterator<Item = &'a String>) -> Option<&'a str> {
    keys.into_iter()
        .filter(|key| Scope::of(key).0 == Scope::App)
        .min()
        .map(String::as_str)
}

/// The delta as it is stored with its event: without `temp:` keys.
pub fn without_temp_keys(delta: &mut HashMap<String, Value>) {
    delta.retain(|key, _| Scope::of(key).0 != Scope::Temp);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn split_and_merge_round_trip() {
        let delta: HashMap<String, Value> = [
            ("app:theme", json!("dark")),
            ("user:lang", json!("en")),
            ("temp:step", json!(3)),
            ("topic", json!("x")),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let scoped = ScopedDelta::split(&delta);
        assert_eq!(scoped.app, HashMap::from([("theme".to_string(), json!("dark"))]));
        assert_eq!(scoped.user, HashMap::from([("lang".to_string(), json!("en"))]));
        assert_eq!(scoped.session, HashMap::from([("topic".to_string(), json!("x"))]));

        let merged = merge_state(scoped.app, scoped.user, scoped.session);
        assert_eq!(merged.get("app:theme"), Some(json!("dark")));
        assert_eq!(merged.get("user:lang"), Some(json!("en")));
        assert_eq!(merged.get("topic"), Some(json!("x")));
        assert_eq!(merged.get("temp:step"), None);
        assert_eq!(merged.len(), 3);
    }

    #[test]
    fn the_first_app_key_is_found_whatever_the_order() {
        let keys = ["topic", "app:z", "user:x", "app:b", "temp:app:y"].map(String::from);
        assert_eq!(first_app_key(&keys), Some("app:b"));
        assert_eq!(first_app_key(&keys[..1]), None);
    }

    #[test]
    fn temp_keys_are_trimmed() {
        let mut delta = HashMap::from([("temp:a".to_string(), json!(1)), ("b".to_string(), json!(2))]);
        without_temp_keys(&mut delta);
        assert_eq!(delta, HashMap::from([("b".to_string(), json!(2))]));
    }
}
