//! Input rules shared by every backend, so a bad id can never forge a storage
//! key or a path, whichever store or transport it arrives through.

use crate::error::{AdkError, Result};
use crate::state::Scope;
use serde_json::Value;
use std::collections::HashMap;

pub const MAX_ID_BYTES: usize = 128;
pub const MAX_STATE_KEY_BYTES: usize = 1024;
pub const DEFAULT_PAGE_SIZE: usize = 100;
pub const MAX_PAGE_SIZE: usize = 1000;

/// `app_name`, `user_id`, `session_id` and event ids: 1-128 bytes of `[A-Za-z0-9._@-]`.
pub fn id(field: &str, value: &str) -> Result<()> {
    let allowed = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'@' | b'-');
    if value.is_empty() {
        return Err(AdkError::invalid(format!("{field} is required")));
    }
    // "." and ".." fit the alphabet but mean something to every path-based store.
    if value.len() > MAX_ID_BYTES || !value.bytes().all(allowed) || value == "." || value == ".." {
        return Err(AdkError::invalid(format!(
            "{field} must be 1-{MAX_ID_BYTES} bytes of [A-Za-z0-9._@-] (and not \".\" or \"..\"), got {}",
            quoted(value)
        )));
    }
    Ok(())
}

/// The (app, user, session) triple that names a session.
pub fn session_ids(app_name: &str, user_id: &str, session_id: &str) -> Result<()> {
    id("app_name", app_name)?;
    id("user_id", user_id)?;
    id("session_id", session_id)
}

/// State keys: non-empty, bounded, and a scope prefix must name something.
pub fn state_keys(field: &str, state: &HashMap<String, Value>) -> Result<()> {
    for key in state.keys() {
        if key.is_empty() {
            return Err(AdkError::invalid(format!("{field} has an empty key")));
        }
        if key.len() > MAX_STATE_KEY_BYTES {
            return Err(AdkError::invalid(format!(
                "{field} key {} is longer than {MAX_STATE_KEY_BYTES} bytes",
                quoted(key)
            )));
        }
        if Scope::of(key).1.is_empty() {
            return Err(AdkError::invalid(format!(
                "{field} key {} has a scope prefix but no name",
                quoted(key)
            )));
        }
    }
    Ok(())
}

/// Requested page sizes: 0 means the default; above the maximum is capped (as AIP-158 suggests).
pub fn page_size(requested: usize) -> usize {
    match requested {
        0 => DEFAULT_PAGE_SIZE,
        n => n.min(MAX_PAGE_SIZE),
    }
}

/// A value for an error message: quoted, escaped and cut short.
pub fn quoted(value: &str) -> String {
    const SHOWN: usize = 64;
    if value.chars().count() <= SHOWN {
        format!("{value:?}")
    } else {
        let head: String = value.chars().take(SHOWN).collect();
        format!("{head:?}... ({} bytes)", value.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ids_accept_the_documented_alphabet() {
        for ok in ["a", "my_app", "user@example.com", "A-Z.0_9", &"x".repeat(128)] {
            assert!(id("app_name", ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn ids_reject_everything_else_naming_the_field() {
        for bad in [
            "",
            ".",
            "a:b",
            "a*",
            "{tag}",
            "a/b",
            "..",
            "a\0b",
            "ünï",
            "a b",
            &"x".repeat(129),
        ] {
            let err = id("user_id", bad).unwrap_err();
            assert_eq!(err.code(), tonic::Code::InvalidArgument);
            assert!(err.to_string().contains("user_id"), "{err}");
        }
    }

    #[test]
    fn state_key_rules() {
        let ok = HashMap::from([("app:x".to_string(), json!(1)), ("y".to_string(), json!(null))]);
        assert!(state_keys("state", &ok).is_ok());
        for bad in ["", "app:", "user:", "temp:", &"k".repeat(1025)] {
            let map = HashMap::from([(bad.to_string(), json!(1))]);
            assert!(state_keys("state", &map).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn page_sizes() {
        assert_eq!(page_size(0), DEFAULT_PAGE_SIZE);
        assert_eq!(page_size(7), 7);
        assert_eq!(page_size(1_000_000), MAX_PAGE_SIZE);
    }
}
