//! The behaviour contract, `docs/semantics.md`, is the project's own: nothing in the
//! repository cites documents the repository does not hold, and every test the
//! contract names as a rule's proof exists where it says.

use std::path::{Path, PathBuf};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the repository")
        .to_path_buf()
}

/// Every file of the repository a person wrote, skipping build output, installed
/// packages, virtualenvs and git's own files.
fn repository_files(dir: &Path, files: &mut Vec<PathBuf>) {
    const SKIPPED: [&str; 6] = [
        "target",
        "node_modules",
        ".git",
        ".venv",
        "__pycache__",
        ".pytest_cache",
    ];
    for entry in std::fs::read_dir(dir).expect("read a repository directory") {
        let path = entry.expect("a directory entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if path.is_dir() {
            if !SKIPPED.contains(&name) {
                repository_files(&path, files);
            }
        } else {
            files.push(path);
        }
    }
}

#[test]
fn nothing_cites_documents_outside_the_repository() {
    // Spelled in pieces, so this file does not cite them itself. Case matters for the
    // file name only: docs/semantics.md is the contract that replaces it.
    let outside = [
        (["SEMANTICS", ".md"].concat(), true),
        (["design", " doc"].concat(), false),
        (["seed", " 00"].concat(), false),
    ];
    let root = repo_root();
    let mut files = Vec::new();
    repository_files(&root, &mut files);
    let mut citations = Vec::new();
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue; // not text
        };
        for (number, line) in text.lines().enumerate() {
            for (needle, case_sensitive) in &outside {
                let cited = if *case_sensitive {
                    line.contains(needle.as_str())
                } else {
                    line.to_lowercase().contains(needle.as_str())
                };
                if cited {
                    let shown = file.strip_prefix(&root).unwrap_or(&file).display().to_string();
                    citations.push(format!("{shown}:{}: {needle}", number + 1));
                }
            }
        }
    }
    assert!(
        citations.is_empty(),
        "cite docs/semantics.md (and its rule numbers) instead:\n{}",
        citations.join("\n")
    );
}

/// The file a proof's prefix names: a path, or a conformance suite by its short name.
fn proof_file(prefix: &str) -> Option<&str> {
    match prefix {
        "conformance" => Some("shared/testkit/src/conformance.rs"),
        "artifact_conformance" => Some("shared/testkit/src/artifact_conformance.rs"),
        "memory_conformance" => Some("shared/testkit/src/memory_conformance.rs"),
        path if path.ends_with(".rs") || path.ends_with(".py") || path.ends_with(".js") => Some(path),
        _ => None,
    }
}

#[test]
fn every_test_the_contract_names_exists() {
    let root = repo_root();
    let contract = std::fs::read_to_string(root.join("docs/semantics.md")).expect("docs/semantics.md");
    let mut named = 0;
    let mut missing = Vec::new();
    // `file::test` names a test; a following `::test` names another in the same file.
    let mut file: Option<String> = None;
    for (i, span) in contract.split('`').enumerate() {
        if i % 2 == 0 || !span.contains("::") || span.contains(' ') {
            continue; // outside backticks, or not a proof
        }
        let (prefix, test) = span.rsplit_once("::").expect("contains ::");
        if !prefix.is_empty() {
            match proof_file(prefix) {
                Some(path) => file = Some(path.to_string()),
                None => {
                    missing.push(format!("`{span}`: `{prefix}` is no test file"));
                    continue;
                }
            }
        }
        let Some(path) = &file else {
            missing.push(format!("`{span}`: no file before it"));
            continue;
        };
        let source = std::fs::read_to_string(root.join(path)).unwrap_or_default();
        let definition = if path.ends_with(".py") {
            format!("def {test}(")
        } else if path.ends_with(".js") {
            // node:test, its name written as an identifier so the contract can cite it
            format!("test('{test}'")
        } else {
            format!("fn {test}(")
        };
        named += 1;
        if !source.contains(&definition) {
            missing.push(format!("`{span}`: no `{definition}` in {path}"));
        }
    }
    assert!(
        named > 50,
        "the contract names only {named} tests: did the parsing break?"
    );
    assert!(
        missing.is_empty(),
        "docs/semantics.md names tests that do not exist:\n{}",
        missing.join("\n")
    );
}
