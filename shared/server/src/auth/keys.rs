//! Static API keys. The file (`--api-keys`; a Kubernetes Secret can mount it) holds
//! one JSON object per line, blank lines and `#` comments ignored:
//!
//! ```text
//! {"sha256": "<64 hex digits>", "apps": ["support"], "user": "alice"}
//! {"sha256": "<64 hex digits>", "apps": ["*"], "role": "admin", "name": "ops"}
//! ```
//!
//! Only the SHA-256 of each key is stored (`printf %s KEY | sha256sum`). A presented
//! key is hashed and compared with every entry in constant time.

use super::{Apps, Principal, Subject};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum ApiKeysError {
    #[error("cannot read {path}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}, line {line}: {message}")]
    Entry {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{path} holds no key")]
    Empty { path: PathBuf },
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    sha256: String,
    apps: Vec<String>,
    #[serde(default)]
    user: Option<String>,
    #[serde(default)]
    role: Option<String>,
    /// A label for the key (who holds it); never used for authorization.
    #[serde(default)]
    #[allow(dead_code)]
    name: Option<String>,
}

#[derive(Debug)]
struct ApiKey {
    hash: [u8; 32],
    principal: Principal,
}

#[derive(Debug, Default)]
pub(crate) struct ApiKeys {
    keys: Vec<ApiKey>,
}

impl ApiKeys {
    pub(crate) fn load(path: &Path) -> Result<ApiKeys, ApiKeysError> {
        let text = std::fs::read_to_string(path).map_err(|source| ApiKeysError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let keys = ApiKeys::parse(&text).map_err(|(line, message)| ApiKeysError::Entry {
            path: path.to_path_buf(),
            line,
            message,
        })?;
        if keys.is_empty() {
            return Err(ApiKeysError::Empty {
                path: path.to_path_buf(),
            });
        }
        Ok(keys)
    }

    /// The keys of a file's text; Err((line number, message)).
    fn parse(text: &str) -> Result<ApiKeys, (usize, String)> {
        let mut keys: Vec<ApiKey> = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let line_number = index + 1;
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let entry: Entry = serde_json::from_str(line).map_err(|err| (line_number, err.to_string()))?;
            let key = entry.into_key().map_err(|message| (line_number, message))?;
            if keys.iter().any(|other| other.hash == key.hash) {
                return Err((line_number, "the same key hash appears twice".to_string()));
            }
            keys.push(key);
        }
        Ok(ApiKeys { keys })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The principal of `token`, if it is one of the keys. Every entry is compared,
    /// each in constant time, so the timing tells nothing about which bytes matched.
    pub(crate) fn find(&self, token: &str) -> Option<Principal> {
        let hash: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let mut found = None;
        for key in &self.keys {
            if constant_time_eq(&key.hash, &hash) {
                found = Some(&key.principal);
            }
        }
        found.cloned()
    }
}

impl Entry {
    fn into_key(self) -> Result<ApiKey, String> {
        let hash = parse_hex(&self.sha256)
            .ok_or("`sha256` must be the 64 hex digits of the key's SHA-256 (printf %s KEY | sha256sum)")?;
        if self.apps.is_empty() || self.apps.iter().any(|app| app.is_empty()) {
            return Err("`apps` must list at least one app (or \"*\" for all), none empty".to_string());
        }
        let subject = match (self.user, self.role.as_deref()) {
            (Some(user), None) if !user.is_empty() => Subject::User(user),
            (None, Some("admin")) => Subject::Admin,
            (None, Some(role)) => return Err(format!("unknown role {role:?}: the only role is \"admin\"")),
            _ => return Err("give exactly one of `user` (a non-empty user id) and `role: \"admin\"`".to_string()),
        };
        Ok(ApiKey {
            hash,
            principal: Principal {
                subject,
                apps: Apps::from_list(self.apps),
            },
        })
    }
}

fn parse_hex(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.trim().as_bytes();
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (byte, pair) in out.iter_mut().zip(hex.chunks(2)) {
        let digits = std::str::from_utf8(pair).ok()?;
        *byte = u8::from_str_radix(digits, 16).ok()?;
    }
    Some(out)
}

/// Equal without an early exit: the time taken does not depend on where they differ.
fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    let difference = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(difference) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(key: &str) -> String {
        Sha256::digest(key.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    #[test]
    fn keys_are_found_by_their_hash_only() {
        let text = format!(
            "# keys\n\n{{\"sha256\": \"{}\", \"apps\": [\"support\"], \"user\": \"alice\"}}\n{{\"sha256\": \"{}\", \"apps\": [\"*\"], \"role\": \"admin\", \"name\": \"ops\"}}\n",
            hex("alice-key"),
            hex("admin-key").to_uppercase()
        );
        let keys = ApiKeys::parse(&text).unwrap();
        assert_eq!(
            keys.find("alice-key"),
            Some(Principal {
                subject: Subject::User("alice".into()),
                apps: Apps::Only(vec!["support".into()])
            })
        );
        assert_eq!(keys.find("admin-key").unwrap().subject, Subject::Admin);
        assert_eq!(keys.find("admin-key").unwrap().apps, Apps::All);
        assert_eq!(keys.find("alice-key "), None);
        assert_eq!(keys.find(&hex("alice-key")), None, "the hash itself is not a key");
    }

    #[test]
    fn bad_entries_name_their_line() {
        let good = hex("k");
        for (text, expected) in [
            (r#"{"sha256": "abc", "apps": ["*"], "user": "u"}"#.to_string(), "64 hex"),
            (
                format!("{{\"sha256\": \"{good}\", \"apps\": [], \"user\": \"u\"}}"),
                "at least one app",
            ),
            (format!("{{\"sha256\": \"{good}\", \"apps\": [\"*\"]}}"), "exactly one"),
            (
                format!("{{\"sha256\": \"{good}\", \"apps\": [\"*\"], \"user\": \"u\", \"role\": \"admin\"}}"),
                "exactly one",
            ),
            (
                format!("{{\"sha256\": \"{good}\", \"apps\": [\"*\"], \"role\": \"root\"}}"),
                "unknown role",
            ),
            (
                format!("{{\"sha256\": \"{good}\", \"apps\": [\"*\"], \"user\": \"u\", \"key\": \"x\"}}"),
                "unknown field",
            ),
            (
                format!(
                    "{{\"sha256\": \"{good}\", \"apps\": [\"*\"], \"user\": \"u\"}}\n{{\"sha256\": \"{good}\", \"apps\": [\"*\"], \"user\": \"v\"}}"
                ),
                "twice",
            ),
        ] {
            let (_, message) = ApiKeys::parse(&text).unwrap_err();
            assert!(message.contains(expected), "{text}: {message}");
        }
    }
}
