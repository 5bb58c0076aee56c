//! The Python venv of the tests that run the official Python SDKs (google-adk,
//! a2a-sdk) as peers or as tools that write test inputs (`adk create`).

use std::path::PathBuf;

/// The Python of the venv scripts/setup-python.sh makes ($ADK_PYTHON overrides).
///
/// # Panics
/// When the venv is missing: the tests that need it fail rather than skip.
pub fn venv_python() -> PathBuf {
    if let Some(python) = std::env::var_os("ADK_PYTHON") {
        return python.into();
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache"));
    let python = cache.join("adk/python-venv/bin/python");
    assert!(
        python.exists(),
        "{} not found: run scripts/setup-python.sh (scripts/test.sh does) first",
        python.display()
    );
    python
}
