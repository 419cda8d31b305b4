//! The never-rules of ARCHITECTURE.md, checked over the source tree the way rust-analyzer's
//! `tidy` test does: every `crate::…` path names an edge from the folder it is written in to
//! the folder it reaches, and an edge that runs up a floor or breaks an invariant fails here.
//! Also no import circle between the sibling modules of a folder (`architecture/cycles.rs`),
//! and the size rules: no source file over 600 lines, no type whose inherent methods are
//! spread over more than three files.
//!
//! The checker is plain functions over (path, text) pairs so the test at the bottom can feed
//! it a tree with one forbidden edge and see it caught.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

#[path = "architecture/cycles.rs"]
mod cycles;

/// The floors of the main crate, lowest first. A module may reach its own floor or any floor
/// below; reaching up is an arrow back up. Modules on one floor do not reach each other.
const FLOORS: &[&[&str]] = &[
    &["clock", "heap_stats", "home"],
    &["config"],
    &["logging"],
    &["skills", "process"],
    &["coord", "hooks"],
    &["state"],
    &["cron"],
    &["tools"],
    &["agent"],
    &["gateway"],
    &["cli"],
    &["main", "lib", "bin"],
];

/// Words that name a storage backend; outside `src/state` none may appear in code.
const BACKEND_WORDS: &[&str] = &[
    "sqlx",
    "rusqlite",
    "PgPool",
    "state::postgres",
    "state::sqlite",
];

const MAX_LINES: usize = 600;
const MAX_FILES_PER_TYPE: usize = 3;

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Violation {
    file: String,
    rule: String,
}

fn floor_of(module: &str) -> Option<usize> {
    FLOORS.iter().position(|floor| floor.contains(&module))
}

/// The top-level module a file of the main crate belongs to: `src/gateway/x.rs` → `gateway`.
fn module_of(path: &str) -> Option<String> {
    let rest = path.strip_prefix("src/")?;
    let first = rest.split('/').next()?;
    Some(first.trim_end_matches(".rs").to_string())
}

/// Code without comments and string literals, so a doc line or a message that mentions
/// `crate::gateway` is not an edge. Line-based and naive about raw strings, which is enough
/// for paths: a path never spans lines inside a literal.
fn code_only(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let mut in_string = false;
        let mut escaped = false;
        let mut prev = ' ';
        for c in line.chars() {
            if in_string {
                match (escaped, c) {
                    (false, '\\') => escaped = true,
                    (false, '"') => in_string = false,
                    _ => escaped = false,
                }
            } else if c == '"' {
                in_string = true;
            } else if c == '/' && prev == '/' {
                out.pop();
                break;
            } else {
                out.push(c);
            }
            prev = c;
        }
        out.push('\n');
    }
    out
}

/// Every module named after `crate::`, including the members of `crate::{a, b::c}`.
fn reached_modules(code: &str) -> BTreeSet<String> {
    let mut reached = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let after = &rest[at + "crate::".len()..];
        let preceded_by_ident = rest[..at]
            .chars()
            .last()
            .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$');
        if !preceded_by_ident {
            if let Some(group) = after.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                for member in group[..end].split(',') {
                    let name: String = member
                        .trim()
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if !name.is_empty() {
                        reached.insert(name);
                    }
                }
            } else {
                let name: String = after
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    reached.insert(name);
                }
            }
        }
        rest = after;
    }
    reached
}

/// The named never-rules, beyond "no arrow up a floor".
fn never_rule(from: &str, to: &str) -> Option<&'static str> {
    match (from, to) {
        ("state", "gateway" | "agent" | "tools") => {
            Some("state reaches neither gateway, agent nor tools")
        }
        ("agent" | "tools", "gateway") => Some("agent and tools never reach gateway"),
        ("config", "gateway" | "tools" | "cron" | "logging" | "agent" | "state" | "cli") => {
            Some("config is pure: it reaches no runtime module")
        }
        _ => None,
    }
}

fn check_edges(files: &[(String, String)]) -> Vec<Violation> {
    let mut found = Vec::new();
    for (path, text) in files {
        let code = code_only(text);
        if path.starts_with("src/") && !path.starts_with("src/state/") {
            for word in BACKEND_WORDS {
                if code.contains(word) {
                    found.push(Violation {
                        file: path.clone(),
                        rule: format!("nothing outside src/state names a backend (`{word}`)"),
                    });
                }
            }
        }
        if let Some(adapter) = path.strip_prefix("adapters/") {
            let is_contract = adapter.starts_with("contract/");
            if code.contains("hermesd::") {
                found.push(Violation {
                    file: path.clone(),
                    rule: "adapters reach only the contract crate, never hermesd".into(),
                });
            }
            if is_contract && (code.contains("rusqlite") || code.contains("sqlx")) {
                found.push(Violation {
                    file: path.clone(),
                    rule: "the adapter contract is storage-free".into(),
                });
            }
        }
        let Some(from) = module_of(path) else {
            continue;
        };
        let Some(from_floor) = floor_of(&from) else {
            found.push(Violation {
                file: path.clone(),
                rule: format!("module `{from}` has no floor in FLOORS"),
            });
            continue;
        };
        for to in reached_modules(&code) {
            if to == from {
                continue;
            }
            if let Some(rule) = never_rule(&from, &to) {
                found.push(Violation {
                    file: path.clone(),
                    rule: format!("{rule} ({from} → {to})"),
                });
            } else if let Some(to_floor) = floor_of(&to)
                && to_floor >= from_floor
            {
                found.push(Violation {
                    file: path.clone(),
                    rule: format!("arrow back up a floor: {from} → {to}"),
                });
            }
        }
    }
    found.sort();
    found
}

fn check_manifests(manifests: &[(String, String)]) -> Vec<Violation> {
    let mut found = Vec::new();
    for (path, text) in manifests {
        let deps = text.split("[dev-dependencies]").next().unwrap_or("");
        if path.starts_with("adapters/")
            && deps.lines().any(|l| l.trim_start().starts_with("hermesd"))
        {
            found.push(Violation {
                file: path.clone(),
                rule: "adapters depend only on the contract crate".into(),
            });
        }
        if path.starts_with("adapters/contract/")
            && deps.lines().any(|l| {
                let l = l.trim_start();
                l.starts_with("rusqlite") || l.starts_with("sqlx")
            })
        {
            found.push(Violation {
                file: path.clone(),
                rule: "the adapter contract is storage-free".into(),
            });
        }
    }
    found
}

/// Façades whose inherent methods all live in one file: a reader finds every entry point
/// there, and a part's behaviour in the part's own struct, not in another `impl` block.
const FACADES: &[(&str, &str)] = &[("Router", "src/gateway/router/mod.rs")];

fn check_sizes(files: &[(String, String)]) -> Vec<Violation> {
    let mut found = Vec::new();
    let mut impl_files: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for (path, text) in files {
        let lines = text.lines().count();
        if lines > MAX_LINES {
            found.push(Violation {
                file: path.clone(),
                rule: format!("{lines} lines, over {MAX_LINES}"),
            });
        }
        let crate_root = crate_of(path);
        for line in text.lines() {
            if let Some(name) = inherent_impl_target(line) {
                impl_files
                    .entry((crate_root.clone(), name))
                    .or_default()
                    .insert(path.clone());
            }
        }
    }
    for (name, home) in FACADES {
        let elsewhere: Vec<&String> = impl_files
            .get(&(String::new(), name.to_string()))
            .into_iter()
            .flatten()
            .filter(|file| file.as_str() != *home)
            .collect();
        if let Some(first) = elsewhere.first() {
            found.push(Violation {
                file: (*first).clone(),
                rule: format!("`impl {name}` outside {home}: the façade has one file"),
            });
        }
    }
    for ((_, name), files) in impl_files {
        if files.len() > MAX_FILES_PER_TYPE {
            let list: Vec<_> = files.into_iter().collect();
            found.push(Violation {
                file: list[0].clone(),
                rule: format!(
                    "`impl {name}` spread over {} files: {}",
                    list.len(),
                    list.join(", ")
                ),
            });
        }
    }
    found.sort();
    found
}

/// The crate a file belongs to, so same-named types of different crates are not counted
/// together: `adapters/slack/src/x.rs` → `adapters/slack`, `tests/fake-slack/src/x.rs` →
/// `tests/fake-slack`, each `tests/<name>` its own test crate, `src/x.rs` the main crate.
fn crate_of(path: &str) -> String {
    if let Some(at) = path.find("/src/") {
        return path[..at].to_string();
    }
    if let Some(rest) = path.strip_prefix("tests/") {
        return format!("tests/{}", rest.split('/').next().unwrap_or(rest));
    }
    String::new()
}

/// `impl Foo {` or `impl<T> Foo<T> {` at the start of a line (not `impl Trait for Foo`).
fn inherent_impl_target(line: &str) -> Option<String> {
    let rest = line.trim_start().strip_prefix("impl")?;
    let rest = if let Some(generic) = rest.strip_prefix('<') {
        let mut depth = 1;
        let mut end = 0;
        for (i, c) in generic.char_indices() {
            match c {
                '<' => depth += 1,
                '>' => {
                    depth -= 1;
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        &generic[end..]
    } else {
        rest
    };
    if !rest.starts_with(' ') {
        return None;
    }
    let head = rest.split('{').next()?;
    if !rest.contains('{') || head.contains(" for ") || head.contains("where") {
        return None;
    }
    let name: String = head
        .trim()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (name.chars().next().is_some_and(|c| c.is_ascii_uppercase())).then_some(name)
}

fn read_tree(root: &Path, dirs: &[&str], ext: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack: Vec<PathBuf> = dirs.iter().map(|d| root.join(d)).collect();
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            if path.is_dir() {
                if name != "target" && name != "node_modules" {
                    stack.push(path);
                }
            } else if path.to_string_lossy().ends_with(ext) {
                let rel = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/");
                let text = std::fs::read_to_string(&path).unwrap();
                out.push((rel, text));
            }
        }
    }
    out.sort();
    out
}

fn report(what: &str, violations: &[Violation]) {
    assert!(
        violations.is_empty(),
        "{what}: {} violation(s)\n{}",
        violations.len(),
        violations
            .iter()
            .map(|v| format!("  {}: {}", v.file, v.rule))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn no_arrow_runs_back_up_and_no_never_rule_is_broken() {
    let files = read_tree(&root(), &["src", "adapters"], ".rs");
    assert!(
        files.len() > 100,
        "the source tree was not found under {}",
        root().display()
    );
    report("import rules", &check_edges(&files));
    let manifests = read_tree(&root(), &["adapters"], "Cargo.toml");
    report("manifest rules", &check_manifests(&manifests));
}

#[test]
fn no_import_circle_between_sibling_modules() {
    let files = read_tree(&root(), &["src", "adapters"], ".rs");
    report("import circles", &cycles::check_circles(&files));
}

#[test]
fn files_stay_small_and_types_live_in_few_files() {
    let files = read_tree(&root(), &["src", "adapters", "tests"], ".rs");
    report("size rules", &check_sizes(&files));
}

#[test]
fn the_checker_catches_a_forbidden_edge() {
    let tree = |path: &str, text: &str| vec![(path.to_string(), text.to_string())];
    let up = check_edges(&tree(
        "src/tools/x.rs",
        "use crate::agent::provider::Provider;\n",
    ));
    assert_eq!(up.len(), 1, "{up:?}");
    assert!(up[0].rule.contains("back up"), "{up:?}");
    let never = check_edges(&tree(
        "src/agent/x.rs",
        "use crate::{config::Config, gateway::Router};\n",
    ));
    assert!(
        never.iter().any(|v| v.rule.contains("never reach gateway")),
        "{never:?}"
    );
    let pure = check_edges(&tree(
        "src/config/x.rs",
        "fn f() { crate::logging::init(); }\n",
    ));
    assert!(
        pure.iter().any(|v| v.rule.contains("config is pure")),
        "{pure:?}"
    );
    let backend = check_edges(&tree("src/gateway/x.rs", "use sqlx::PgPool;\n"));
    assert_eq!(backend.len(), 2, "{backend:?}");
    let adapter = check_edges(&tree(
        "adapters/slack/src/x.rs",
        "use hermesd::state::Store;\n",
    ));
    assert_eq!(adapter.len(), 1, "{adapter:?}");
    let downward = check_edges(&tree(
        "src/gateway/x.rs",
        "// crate::cli is only mentioned\nuse crate::{agent::A, tools::T};\nlet s = \"crate::cli\";\n",
    ));
    assert_eq!(downward, Vec::new());
    let manifest = check_manifests(&tree(
        "adapters/contract/Cargo.toml",
        "[dependencies]\nrusqlite = \"1\"\n",
    ));
    assert_eq!(manifest.len(), 1);
}

#[test]
fn the_checker_catches_big_files_and_spread_types() {
    let long = "fn f() {}\n".repeat(MAX_LINES + 1);
    assert_eq!(check_sizes(&[("src/a.rs".into(), long)]).len(), 1);
    let spread: Vec<(String, String)> = (0..4)
        .map(|i| {
            (
                format!("src/r/{i}.rs"),
                "impl<'a> Widget<'a> {\n}\nimpl Display for X {\n}\n".into(),
            )
        })
        .collect();
    let found = check_sizes(&spread);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].rule.contains("Widget"));
    let stray = check_sizes(&[
        (
            "src/gateway/router/mod.rs".into(),
            "impl Router {\n}\n".into(),
        ),
        (
            "src/gateway/router/turn.rs".into(),
            "impl Router {\n}\n".into(),
        ),
    ]);
    assert_eq!(stray.len(), 1, "{stray:?}");
    assert!(stray[0].rule.contains("outside src/gateway/router/mod.rs"));
    assert_eq!(inherent_impl_target("impl fmt::Display for Secret {"), None);
    assert_eq!(
        inherent_impl_target("impl Store {").as_deref(),
        Some("Store")
    );
    assert_eq!(crate_of("src/gateway/cron/mod.rs"), "");
    assert_eq!(crate_of("adapters/slack/src/x.rs"), "adapters/slack");
    assert_eq!(crate_of("tests/discord_rig/mod.rs"), "tests/discord_rig");
}

#[test]
fn the_checker_catches_an_import_circle() {
    let tree = |files: &[(&str, &str)]| -> Vec<(String, String)> {
        files
            .iter()
            .map(|(p, t)| (p.to_string(), t.to_string()))
            .collect()
    };
    let circle = tree(&[
        ("src/lib.rs", "pub mod gw;\n"),
        ("src/gw/mod.rs", "mod a;\nmod b;\nmod c;\npub struct Top;\n"),
        ("src/gw/a.rs", "use super::b::B;\nuse super::Top;\n"),
        ("src/gw/b/mod.rs", "mod inner;\npub struct B;\n"),
        (
            "src/gw/b/inner.rs",
            "fn f() { crate::gw::c::run(); }\nuse super::B;\n",
        ),
        ("src/gw/c.rs", "use crate::gw::{Top, a::{self, A}};\n"),
    ]);
    let found = cycles::check_circles_with(&circle, &[]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].file, "src/gw");
    assert!(
        found[0].rule.contains("a, b, c") && found[0].rule.contains("src/gw/b/inner.rs"),
        "{found:?}"
    );
    let allowed: &[(&str, &[&str], &str)] = &[("src/gw", &["a", "b", "c"], "synthetic")];
    assert_eq!(cycles::check_circles_with(&circle, allowed), Vec::new());
    let partly: &[(&str, &[&str], &str)] = &[("src/gw", &["a", "b"], "synthetic")];
    assert_eq!(cycles::check_circles_with(&circle, partly).len(), 1);

    // A child using its parent's items, a test module's `super`, a comment and a string
    // are no edges; so no circle.
    let acyclic = tree(&[
        ("src/gw/mod.rs", "mod a;\nmod b;\npub use a::A;\n"),
        (
            "src/gw/a.rs",
            "use super::b::B;\n#[cfg(test)]\nmod tests {\n    use super::super::b;\n    use super::*;\n}\n",
        ),
        (
            "src/gw/b.rs",
            "use crate::gw::A; // crate::gw::a::A\nconst S: &str = \"super::a\";\nconst C: char = '{';\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n",
        ),
    ]);
    assert_eq!(cycles::check_circles_with(&acyclic, &[]), Vec::new());
    // ... but a `super::super::a` from inside b's test module is b → a.
    let mut via_test = acyclic.clone();
    via_test[2]
        .1
        .push_str("#[cfg(test)]\nmod more {\n    use super::super::a::A;\n}\n");
    assert_eq!(cycles::check_circles_with(&via_test, &[]).len(), 1);
}
