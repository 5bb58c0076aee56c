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

/// Every `docs/<name>.md` the repository's files name (code comments, scripts, manifests,
/// pages): a page split or renamed leaves none naming the old one. CHANGELOG.md tells
/// history and may name pages as they were then.
#[test]
fn every_docs_page_the_repository_names_exists() {
    let root = repo_root();
    let mut files = Vec::new();
    repository_files(&root, &mut files);
    let mut named = 0;
    let mut missing = Vec::new();
    for file in files.iter().filter(|file| !file.ends_with("CHANGELOG.md")) {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue; // not text
        };
        let shown = file.strip_prefix(&root).unwrap_or(file).display().to_string();
        for (number, line) in text.lines().enumerate() {
            for rest in line.split("docs/").skip(1) {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
                    .collect();
                if name.is_empty() || !rest[name.len()..].starts_with(".md") {
                    continue;
                }
                named += 1;
                // A page of the repository's docs/, or of a docs/ beside the naming file.
                let beside = file.parent().map(|dir| dir.join("docs").join(format!("{name}.md")));
                if !root.join("docs").join(format!("{name}.md")).exists() && !beside.is_some_and(|p| p.exists()) {
                    missing.push(format!("{shown}:{}: docs/{name}.md", number + 1));
                }
            }
        }
    }
    assert!(named > 40, "only {named} docs pages named: did the scan break?");
    assert!(
        missing.is_empty(),
        "pages named that docs/ lacks:\n{}",
        missing.join("\n")
    );
}

/// Every metric the suite registers (`shared/telemetry/src/metrics.rs`) has its row in
/// docs/observability.md's table, and the table names no other.
#[test]
fn the_metrics_table_lists_every_metric_the_code_registers() {
    let code = std::fs::read_to_string(repo_root().join("shared/telemetry/src/metrics.rs")).expect("metrics.rs");
    let doc = std::fs::read_to_string(repo_root().join("docs/observability.md")).expect("docs/observability.md");
    let metric_name = |text: &str| -> Option<String> {
        let name: String = text
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        (name.starts_with("adk_") && name.len() > 4).then_some(name)
    };
    let registered: std::collections::BTreeSet<String> = code
        .split("\"adk_")
        .skip(1)
        .filter_map(|rest| metric_name(&format!("adk_{rest}")))
        .filter(|name| code.contains(&format!("\"{name}\"")))
        .collect();
    let tabled: std::collections::BTreeSet<String> = doc
        .lines()
        .filter_map(|line| line.strip_prefix("| `"))
        .filter_map(metric_name)
        .collect();
    assert!(
        registered.len() > 15,
        "only {} metrics read: did the scan break?",
        registered.len()
    );
    let untabled: Vec<&String> = registered.difference(&tabled).collect();
    let unregistered: Vec<&String> = tabled.difference(&registered).collect();
    assert!(
        untabled.is_empty() && unregistered.is_empty(),
        "docs/observability.md's metrics table and shared/telemetry disagree: not tabled {untabled:?}; \
         tabled but registered nowhere {unregistered:?}"
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
        // A module: the conformance suites' cases, one generated test each.
        let module = format!("mod {test} {{");
        let defined = source.contains(&definition) || (path.ends_with(".rs") && source.contains(&module));
        if !defined {
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

/// Each reason of `adk.v1.ErrorReason` (proto/adk/v1/errors.proto, the one list of them)
/// with the gRPC code and the retry advice its comment gives:
/// "NOT_FOUND. No session of that id for that app and user. Retry: no."
fn proto_reasons() -> Vec<(String, String, String)> {
    let values = adk_grpc_proto::enum_value_comments("adk.v1.ErrorReason");
    assert_eq!(
        values.first().map(|(name, _)| name.as_str()),
        Some("ERROR_REASON_UNSPECIFIED")
    );
    values
        .into_iter()
        .skip(1) // the zero value, never sent
        .map(|(name, comment)| {
            let code = comment.split_once(". ").map(|(code, _)| code.to_string());
            let retry = comment.split_once("Retry: ").map(|(_, retry)| retry.to_string());
            match (code, retry) {
                (Some(code), Some(retry)) => (name, code, retry),
                _ => panic!("{name}'s comment does not start with its gRPC code and say `Retry: …`: {comment}"),
            }
        })
        .collect()
}

/// The spans between backticks of a piece of markdown.
fn backticked(text: &str) -> impl Iterator<Item = &str> {
    text.split('`').skip(1).step_by(2)
}

#[test]
fn the_error_table_of_the_clients_readme_is_the_proto_enum() {
    let readme = std::fs::read_to_string(repo_root().join("clients/README.md")).expect("clients/README.md");
    let header = "| gRPC code | `ErrorInfo.reason` | meaning | RetryInfo |";
    let start = readme.find(header).expect("clients/README.md has the table of reasons");
    // (reason, code, RetryInfo column); a row without a code continues the one above.
    let mut tabled = Vec::new();
    let mut code = "";
    for row in readme[start..].lines().skip(2).take_while(|line| line.starts_with('|')) {
        let cells: Vec<&str> = row.split('|').skip(1).map(str::trim).collect();
        assert!(cells.len() >= 4, "a row of four cells: {row}");
        if !cells[0].is_empty() {
            code = cells[0].trim_matches('`');
        }
        for reason in backticked(cells[1]) {
            tabled.push((reason, code, cells[3]));
        }
    }
    let proto = proto_reasons();
    let tabled_names: Vec<&str> = tabled.iter().map(|(reason, ..)| *reason).collect();
    let missing: Vec<&str> = proto
        .iter()
        .map(|(name, ..)| name.as_str())
        .filter(|name| !tabled_names.contains(name))
        .collect();
    let unknown: Vec<&str> = tabled_names
        .iter()
        .copied()
        .filter(|name| !proto.iter().any(|(reason, ..)| reason == name))
        .collect();
    assert!(
        missing.is_empty() && unknown.is_empty(),
        "clients/README.md's table of reasons differs from adk.v1.ErrorReason: it lacks {missing:?} and names {unknown:?}, \
         which errors.proto lacks"
    );
    assert_eq!(tabled.len(), proto.len(), "a reason is tabled twice: {tabled_names:?}");
    for (reason, code, retry_column) in tabled {
        let (_, proto_code, proto_retry) = proto.iter().find(|(name, ..)| name == reason).expect("checked above");
        assert_eq!(
            code, proto_code,
            "{reason}: the table's gRPC code against errors.proto's"
        );
        // The table's RetryInfo column: empty where errors.proto says no retry makes sense,
        // "yes" where it always does, and the condition where it depends.
        let agrees = match proto_retry {
            retry if retry.starts_with("no") => retry_column.is_empty(),
            retry if retry.starts_with("yes") => retry_column.starts_with("yes"),
            _ => !retry_column.is_empty() && !retry_column.starts_with("yes"),
        };
        assert!(
            agrees,
            "{reason}: the table's RetryInfo column `{retry_column}` against errors.proto's `Retry: {proto_retry}`"
        );
    }
}

#[test]
fn the_contract_names_only_reasons_the_proto_has() {
    let contract = std::fs::read_to_string(repo_root().join("docs/semantics.md")).expect("docs/semantics.md");
    let start = contract.find("\n## 8. Limits and errors").expect("the errors section");
    let end = contract[start + 1..]
        .find("\n## ")
        .map_or(contract.len(), |end| start + 1 + end);
    let proto = proto_reasons();
    // The gRPC code names (each also a reason's name, the generic one of its code) and the
    // health status the section names beside the reasons.
    let not_reasons = ["OK", "UNKNOWN", "OUT_OF_RANGE", "DATA_LOSS", "NOT_SERVING", "SERVING"];
    let mut named = 0;
    let mut unknown = Vec::new();
    for span in backticked(&contract[start..end]) {
        let shaped = span.len() > 1 && span.bytes().all(|b| b.is_ascii_uppercase() || b == b'_');
        if !shaped || not_reasons.contains(&span) {
            continue;
        }
        named += 1;
        if !proto.iter().any(|(reason, ..)| reason == span) {
            unknown.push(span);
        }
    }
    assert!(
        named > 20,
        "the errors section names only {named} reasons: did the parsing break?"
    );
    assert!(
        unknown.is_empty(),
        "docs/semantics.md names reasons adk.v1.ErrorReason (proto/adk/v1/errors.proto) lacks: {unknown:?}"
    );
}

/// The Rust sources under `dir`, but test files (`tests/` directories, `tests.rs`).
fn sources(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read a source directory") {
        let path = entry.expect("a directory entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if path.is_dir() {
            if name != "tests" {
                sources(&path, files);
            }
        } else if name.ends_with(".rs") && name != "tests.rs" {
            files.push(path);
        }
    }
}

/// A source file's code without its unit tests, which come last, in their own module.
fn without_unit_tests(text: &str) -> &str {
    text.split("#[cfg(test)]\nmod ").next().unwrap_or_default()
}

/// The `ADK_*` variables the servers and the test tools read: every `"ADK_…"` string literal
/// (a clap `env = "ADK_…"` or an `env::var("ADK_…")`) in the sources of `shared/` (but the
/// test kit, which only tests use), `services/` and `tests/src`, outside test modules and
/// test files.
fn adk_variables_the_code_reads() -> std::collections::BTreeMap<String, String> {
    let root = repo_root();
    let mut roots = vec![root.join("tests/src")];
    for parent in ["shared", "services"] {
        for entry in std::fs::read_dir(root.join(parent)).expect("a crates directory") {
            let dir = entry.expect("a crate").path();
            if dir.file_name().is_some_and(|name| name != "testkit") && dir.join("src").is_dir() {
                roots.push(dir.join("src"));
            }
        }
    }
    // The test kit's own variables are its tests'; the venv it finds is every test's.
    let mut files = vec![root.join("shared/testkit/src/python.rs")];
    for dir in roots {
        sources(&dir, &mut files);
    }
    let mut read = std::collections::BTreeMap::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("a source file");
        for piece in without_unit_tests(&text).split("\"ADK_").skip(1) {
            let name: String = piece
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            if piece[name.len()..].starts_with('"') {
                let shown = file.strip_prefix(&root).unwrap_or(&file).display().to_string();
                read.entry(format!("ADK_{name}")).or_insert(shown);
            }
        }
    }
    read
}

#[test]
fn the_configuration_tables_list_every_adk_variable_the_code_reads() {
    let doc = std::fs::read_to_string(repo_root().join("docs/configuration.md")).expect("docs/configuration.md");
    // The first cell of each table row: `ADK_…`.
    let tabled: Vec<&str> = doc
        .lines()
        .filter_map(|line| line.strip_prefix('|'))
        .filter_map(|row| row.split('|').next())
        .filter_map(|cell| cell.trim().strip_prefix('`')?.strip_suffix('`'))
        .filter(|name| name.starts_with("ADK_"))
        .collect();
    let read = adk_variables_the_code_reads();
    assert!(
        read.len() > 30,
        "the code reads only {} ADK_* variables: did the scan break? {read:?}",
        read.len()
    );
    let missing: Vec<String> = read
        .iter()
        .filter(|(name, _)| !tabled.contains(&name.as_str()))
        .map(|(name, file)| format!("{name} (read in {file})"))
        .collect();
    let unread: Vec<&str> = tabled
        .iter()
        .copied()
        .filter(|name| !read.contains_key(*name))
        .collect();
    let mut twice = tabled.clone();
    twice.sort_unstable();
    twice.dedup();
    assert!(
        missing.is_empty() && unread.is_empty() && twice.len() == tabled.len(),
        "docs/configuration.md's tables and the code disagree: not tabled {missing:?}; tabled but read nowhere \
         {unread:?}; {} listed twice",
        tabled.len() - twice.len()
    );
}

/// GitHub's anchor of a heading: lowercase, punctuation but `-` and `_` dropped, spaces as `-`.
fn heading_anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The lines of a markdown file outside fenced code blocks.
fn prose_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut fenced = false;
    text.lines().enumerate().filter(move |(_, line)| {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            return false;
        }
        !fenced
    })
}

/// The anchors of a markdown file's headings (a repeated heading's gets `-1`, `-2`, … as on GitHub).
fn heading_anchors(text: &str) -> Vec<String> {
    let mut seen = std::collections::HashMap::<String, usize>::new();
    let mut anchors = Vec::new();
    for (_, line) in prose_lines(text) {
        let heading = line.trim_start_matches('#');
        if heading.len() == line.len() || !heading.starts_with(' ') {
            continue; // not a heading
        }
        let anchor = heading_anchor(heading);
        let repeats = seen.entry(anchor.clone()).or_default();
        anchors.push(if *repeats == 0 {
            anchor
        } else {
            format!("{anchor}-{repeats}")
        });
        *repeats += 1;
    }
    anchors
}

#[test]
fn relative_links_of_the_readme_and_docs_resolve() {
    let root = repo_root();
    let mut pages: Vec<PathBuf> = Vec::new();
    for dir in [root.clone(), root.join("docs")] {
        for entry in std::fs::read_dir(&dir).expect("a docs directory") {
            let path = entry.expect("a directory entry").path();
            if path.extension().is_some_and(|ext| ext == "md") {
                pages.push(path);
            }
        }
    }
    assert!(pages.iter().any(|page| page.ends_with("README.md")));
    let mut checked = 0;
    let mut broken = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).expect("a markdown file");
        let shown = page.strip_prefix(&root).unwrap_or(page).display().to_string();
        for (number, line) in prose_lines(&text) {
            for piece in line.split("](").skip(1) {
                let Some(target) = piece.split(')').next().filter(|t| !t.contains(' ')) else {
                    continue;
                };
                if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                checked += 1;
                let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
                let file = if path.is_empty() {
                    page.clone()
                } else {
                    page.parent().expect("a page's directory").join(path)
                };
                if !file.exists() {
                    broken.push(format!("{shown}:{}: {target}: no such file", number + 1));
                    continue;
                }
                if !anchor.is_empty() && file.extension().is_some_and(|ext| ext == "md") {
                    let linked = std::fs::read_to_string(&file).expect("a linked markdown file");
                    if !heading_anchors(&linked).iter().any(|a| a == anchor) {
                        broken.push(format!("{shown}:{}: {target}: no heading with that anchor", number + 1));
                    }
                }
            }
        }
    }
    assert!(
        checked > 40,
        "only {checked} relative links found: did the parsing break?"
    );
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The field names serde accepts in a file's structs marked `deny_unknown_fields`: the
/// `pub` fields up to each struct's closing brace. A `rename` would make a YAML name differ
/// from the Rust one, so it fails the scan rather than pass unseen.
fn serde_field_names(file: &str, names: &mut std::collections::BTreeSet<String>) {
    let text = std::fs::read_to_string(repo_root().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    for block in text.split("#[serde(deny_unknown_fields)]").skip(1) {
        let body = block.split("\n}\n").next().unwrap_or_default();
        if !body.contains(" struct ") {
            continue;
        }
        assert!(
            !body.contains("rename"),
            "{file}: a renamed field; teach this scan serde's rename"
        );
        for line in body.lines().map(str::trim).filter(|line| line.starts_with("pub")) {
            let declared = line.split_once(':').map(|(left, _)| left).unwrap_or_default();
            if let Some(name) = declared
                .split_whitespace()
                .last()
                .filter(|_| !line.contains(" struct "))
            {
                names.insert(name.to_string());
            }
        }
    }
}

/// The snake_case names of a unit-variant enum of a file (`enum AgentKind { Llm, … }`).
fn enum_values(file: &str, name: &str) -> Vec<String> {
    let text = std::fs::read_to_string(repo_root().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    let start = text
        .find(&format!("enum {name} {{"))
        .unwrap_or_else(|| panic!("{file} has enum {name}"));
    text[start..]
        .split_once('{')
        .and_then(|(_, rest)| rest.split_once('}'))
        .map(|(body, _)| body)
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter_map(|line| line.strip_suffix(','))
        .filter(|variant| variant.chars().all(|c| c.is_ascii_alphanumeric()))
        .map(snake_case)
        .collect()
}

/// A variant's name as serde's `rename_all = "snake_case"` writes it (`ModelConsult`: `model_consult`).
fn snake_case(variant: &str) -> String {
    let mut out = String::new();
    for (i, c) in variant.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// google-adk's agent fields (its AgentConfig.json schema's `*AgentConfig` properties and the
/// agent classes' pydantic fields) and `google.adk.tools`' exports, read from the venv
/// scripts/setup-python.sh installs (the version clients/python/requirements-dev.txt pins).
fn adk_agent_fields_and_tools() -> (String, Vec<String>, Vec<String>) {
    const SCRIPT: &str = r#"
import importlib.metadata, importlib.util, json, pathlib, warnings
warnings.simplefilter("ignore")
from google.adk import agents
import google.adk.tools as tools
package = pathlib.Path(importlib.util.find_spec("google.adk").submodule_search_locations[0])
schema = json.loads((package / "agents/config_schemas/AgentConfig.json").read_text())
fields = [name for config, definition in schema["$defs"].items() if config.endswith("AgentConfig")
          for name in definition["properties"]]
for agent in (agents.BaseAgent, agents.LlmAgent, agents.LoopAgent, agents.SequentialAgent, agents.ParallelAgent):
    fields += list(agent.model_fields)
print(json.dumps({"version": importlib.metadata.version("google-adk"), "fields": sorted(set(fields)),
                  "tools": sorted(tools.__all__)}))
"#;
    let output = std::process::Command::new(adk_grpc_e2e::venv_python())
        .args(["-c", SCRIPT])
        .output()
        .expect("run the venv's Python");
    assert!(
        output.status.success(),
        "reading google-adk's agent fields failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let read: serde_json::Value = serde_json::from_slice(&output.stdout).expect("the script's JSON");
    let strings = |key: &str| -> Vec<String> {
        read[key]
            .as_array()
            .expect("a list")
            .iter()
            .map(|name| name.as_str().expect("a name").to_string())
            .collect()
    };
    let version = read["version"].as_str().expect("a version").to_string();
    (version, strings("fields"), strings("tools"))
}

/// The rows of the table under a heading of a markdown page, as their cells.
fn table_under<'a>(page: &'a str, heading: &str) -> Vec<Vec<&'a str>> {
    let start = page.find(heading).unwrap_or_else(|| panic!("a section {heading:?}"));
    page[start..]
        .lines()
        .skip_while(|line| !line.starts_with('|'))
        .take_while(|line| line.starts_with('|'))
        .skip(2) // the header and its rule
        .map(|row| row.trim_matches('|').split(" | ").map(str::trim).collect())
        .collect()
}

#[test]
fn the_adk_agent_fields_table_is_complete_and_names_real_fields() {
    let page = std::fs::read_to_string(repo_root().join("docs/adk-agent-fields.md")).expect("docs/adk-agent-fields.md");
    let fields_table = table_under(&page, "## Agent fields");
    let tools_table = table_under(&page, "## Built-in tools");
    let other_table = table_under(&page, "## Other tools");
    let first_names = |table: &[Vec<&str>]| -> Vec<String> {
        table
            .iter()
            .filter_map(|row| backticked(row[0]).next().map(str::to_string))
            .collect()
    };

    // Every ADK field and exported tool has its row, and no row names what ADK lacks.
    let (version, adk_fields, adk_tools) = adk_agent_fields_and_tools();
    assert!(
        version.starts_with("2.13."),
        "the table is of google-adk 2.13; the venv has {version}: review the table, then this check"
    );
    assert!(adk_fields.len() > 30, "only {} ADK agent fields read", adk_fields.len());
    for (what, tabled, adk) in [
        ("agent fields", first_names(&fields_table), &adk_fields),
        ("built-in tools", first_names(&tools_table), &adk_tools),
    ] {
        let missing: Vec<&String> = adk.iter().filter(|name| !tabled.contains(name)).collect();
        let unknown: Vec<&String> = tabled.iter().filter(|name| !adk.contains(name)).collect();
        assert!(
            missing.is_empty() && unknown.is_empty() && tabled.len() == adk.len(),
            "docs/adk-agent-fields.md's {what} differ from google-adk {version}'s: not tabled {missing:?}; \
             tabled but not in ADK {unknown:?}; {} rows in all for {} names",
            tabled.len(),
            adk.len()
        );
    }

    // Every backticked span of the agents-file column is the parser's: `field`, `a.b` (nested
    // fields), `kind`, `transport` or `provider` with a value, or `tools: [built-in]`.
    let mut fields = std::collections::BTreeSet::new();
    serde_field_names("services/runner/src/config/file.rs", &mut fields);
    serde_field_names("shared/models/src/config.rs", &mut fields);
    // `generation`'s tool, image and thinking settings are read into core's own types.
    serde_field_names("shared/core/src/model.rs", &mut fields);
    assert!(
        fields.contains("output_key") && fields.contains("temperature") && fields.contains("base_url"),
        "the scan of the parser's structs found only {fields:?}"
    );
    let file = "services/runner/src/config/file.rs";
    let kinds: Vec<String> = [enum_values(file, "AgentKind"), enum_values(file, "ToolKind")].concat();
    let transports = enum_values(file, "McpTransportKind");
    let providers = enum_values("shared/models/src/config.rs", "ProviderKind");
    let builtin_tools: Vec<String> = std::fs::read_dir(repo_root().join("shared/agents/src/tools"))
        .expect("the runner library's tools")
        .map(|entry| std::fs::read_to_string(entry.expect("a tools file").path()).expect("a tools file"))
        .flat_map(|text| {
            // Every tool name constant (`NAME`, `GOOGLE_SEARCH`, …) of the tools' files.
            text.split(": &'static str = \"")
                .skip(1)
                .filter_map(|rest| rest.split('"').next().map(str::to_string))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        builtin_tools.contains(&"exit_loop".to_string()),
        "built-ins read: {builtin_tools:?}"
    );
    let mut checked = 0;
    let mut wrong = Vec::new();
    for row in fields_table.iter().chain(&tools_table).chain(&other_table) {
        let column = row.last().expect("a row has cells");
        for span in backticked(column) {
            checked += 1;
            let (key, value) = span.split_once(": ").unwrap_or((span, ""));
            let value_known = match key {
                _ if value.is_empty() => true,
                "kind" => kinds.iter().any(|kind| kind == value),
                "transport" => transports.iter().any(|transport| transport == value),
                "provider" => providers.iter().any(|provider| provider == value),
                "tools" => value
                    .strip_prefix('[')
                    .and_then(|v| v.strip_suffix(']'))
                    .is_some_and(|tool| builtin_tools.iter().any(|builtin| builtin == tool)),
                _ => false,
            };
            if !value_known || !key.split('.').all(|segment| fields.contains(segment)) {
                wrong.push(format!("{}: `{span}`", row[0]));
            }
        }
    }
    assert!(
        checked > 40,
        "only {checked} agents-file fields named: did the parsing break?"
    );
    assert!(
        wrong.is_empty(),
        "docs/adk-agent-fields.md names agents-file fields the parser (services/runner/src/config/file.rs, \
         shared/models/src/config.rs) does not accept:\n{}",
        wrong.join("\n")
    );
}

/// The functions of `code` (rustfmt's layout) with their length in lines, from the
/// signature to the closing brace at the signature's indent; bodiless ones left out.
fn function_lengths(code: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = code.lines().collect();
    let mut found = Vec::new();
    for (start, line) in lines.iter().enumerate() {
        let body = line.trim_start();
        let indent = &line[..line.len() - body.len()];
        let mut words = body.split_whitespace().skip_while(|word| {
            word.starts_with("pub") || ["async", "const", "unsafe", "extern", "\"C\""].contains(word)
        });
        if words.next() != Some("fn") {
            continue;
        }
        let name: String = words
            .next()
            .unwrap_or_default()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        // The signature ends at the line that opens the body (or at `;`: no body).
        let Some(opened) = (start..lines.len()).find(|&i| {
            let end = lines[i].trim_end();
            end.ends_with('{') || end.ends_with(';') || end.ends_with('}')
        }) else {
            continue;
        };
        let signature_end = lines[opened].trim_end();
        if signature_end.ends_with(';') {
            continue;
        }
        let closed = if signature_end.ends_with('}') {
            Some(opened)
        } else {
            (opened + 1..lines.len()).find(|&i| lines[i].trim_end() == format!("{indent}}}"))
        };
        if let Some(closed) = closed {
            found.push((name, start + 1, closed - start + 1));
        }
    }
    found
}

#[test]
fn no_function_of_the_runner_library_is_over_80_lines() {
    // Where every next capability goes through: each part of it must stay readable
    // (docs/architecture.md, "The LLM flow").
    const MOST_LINES: usize = 80;
    let root = repo_root();
    let mut files = Vec::new();
    sources(&root.join("shared/agents/src"), &mut files);
    let (mut measured, mut longest, mut over) = (0, 0, Vec::new());
    for file in files {
        let text = std::fs::read_to_string(&file).expect("a source file");
        for (name, line, length) in function_lengths(without_unit_tests(&text)) {
            measured += 1;
            longest = longest.max(length);
            if length > MOST_LINES {
                let shown = file.strip_prefix(&root).unwrap_or(&file).display().to_string();
                over.push(format!("{shown}:{line} fn {name}: {length} lines"));
            }
        }
    }
    assert!(
        measured > 500 && longest > 40,
        "only {measured} functions found (the longest {longest} lines): did the parsing break?"
    );
    assert!(
        over.is_empty(),
        "functions of shared/agents over {MOST_LINES} lines (split them into named parts):\n{}",
        over.join("\n")
    );
}

#[test]
fn function_lengths_run_from_the_signature_to_its_closing_brace() {
    let code = "fn one() -> u8 { 1 }\n\
                pub(crate) async fn two(\n    a: u8,\n) -> u8\nwhere\n    u8: Copy,\n{\n    let b = '{';\n    a\n}\n\
                trait T {\n    fn declared(&self);\n    fn provided(&self) {\n        if true {\n        }\n    }\n}\n";
    assert_eq!(
        function_lengths(code),
        vec![("one".into(), 1, 1), ("two".into(), 2, 9), ("provided".into(), 13, 4)]
    );
}
