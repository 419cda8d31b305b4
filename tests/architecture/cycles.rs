//! Import circles: inside each folder module, the direct children form a graph (a child
//! whose files name `crate::a::c…` or `super::c…` has an edge to its sibling `c`), and a
//! strongly connected component of more than one child is a circle — two parts that cannot
//! be understood, tested or moved one without the other. A child using its parent's own
//! items (`super::Thing`, `crate::a::Thing`) is not a sibling edge.
//!
//! Plain functions over (path, text) pairs, like the rest of the checker, so a self-test can
//! feed it a synthetic tree.

use std::collections::{BTreeMap, BTreeSet};

use super::{Violation, code_only, crate_of};

/// A module path inside its crate: `src/gateway/routing.rs` → `["gateway", "routing"]`.
type ModPath = Vec<String>;

/// Circles known and accepted for now, each with its reason: (the folder, as its source
/// path; the children allowed to be in one circle there; why). A circle there whose members
/// are all listed passes; any other child joining it fails.
const ALLOWED_CYCLES: &[(&str, &[&str], &str)] = &[
    (
        "adapters/discord/src",
        &["inbound", "inner", "place", "threads"],
        "the shared adapter state (inner.rs) and the parts that work on it call each other; \
         untangling it is a façade-over-parts redesign of the adapter, like the router's",
    ),
    (
        "adapters/slack/src",
        &[
            "adapter",
            "assistant",
            "connection",
            "gating",
            "inbound",
            "interactive",
            "memory",
            "outbound",
            "pending",
            "settings",
            "socket_mode",
        ],
        "the adapter (adapter.rs) and the parts it hands itself to (assistant, pending, \
         outbound, socket_mode) call each other; untangling it is a façade-over-parts \
         redesign of the adapter, like the router's",
    ),
];

/// Where each file sits in its crate's module tree; `None` for files outside a library or
/// binary crate's `src/` (tests, benches) and for the extra binaries under `src/bin/`.
fn file_modules(files: &[(String, String)]) -> BTreeMap<String, (String, ModPath)> {
    let mut out = BTreeMap::new();
    for (path, _) in files {
        let Some(at) = path.find("src/") else {
            continue;
        };
        if at != 0 && !path.starts_with("adapters/") {
            continue;
        }
        let rel = &path[at + "src/".len()..];
        if rel.starts_with("bin/") || !rel.ends_with(".rs") {
            continue;
        }
        let mut segments: ModPath = rel
            .trim_end_matches(".rs")
            .split('/')
            .map(str::to_string)
            .collect();
        if matches!(segments.as_slice(), [one] if one == "lib" || one == "main") {
            segments.clear();
        } else if segments.last().is_some_and(|s| s == "mod") {
            segments.pop();
        }
        out.insert(path.clone(), (crate_of(path), segments));
    }
    // `#[path = "x_tests.rs"] mod tests;` puts that file under the declaring module.
    let mut moved = Vec::new();
    for (path, text) in files {
        let Some((krate, module)) = out.get(path).cloned() else {
            continue;
        };
        let dir = &path[..path.rfind('/').map_or(0, |i| i + 1)];
        let mut lines = text.lines();
        while let Some(line) = lines.next() {
            let Some(target) = line
                .trim()
                .strip_prefix("#[path = \"")
                .and_then(|rest| rest.split('"').next())
            else {
                continue;
            };
            let name = lines.find_map(|l| {
                let l = l.trim();
                let rest = l.strip_prefix("pub ").unwrap_or(l).strip_prefix("mod ")?;
                Some(rest.trim_end_matches(';').trim().to_string())
            });
            if let Some(name) = name {
                let mut inner = module.clone();
                inner.push(name);
                moved.push((format!("{dir}{target}"), (krate.clone(), inner)));
            }
        }
    }
    out.extend(moved);
    out
}

/// Every path a piece of code names from `crate::` or `super::`, resolved against `module`
/// (the file's place), with `super` counted from the inline `mod x { … }` it is written in.
fn named_paths(code: &str, module: &[String]) -> Vec<ModPath> {
    let bytes = code.as_bytes();
    let mut found = Vec::new();
    let mut depth = 0usize;
    let mut inline_mods: Vec<usize> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if !c.is_ascii() {
            i += 1;
            continue;
        }
        if c == b'\'' {
            i += char_literal_len(&code[i..]).max(1);
            continue;
        }
        if c == b'{' {
            if opens_inline_mod(&code[..i]) {
                inline_mods.push(depth);
            }
            depth += 1;
        } else if c == b'}' {
            depth = depth.saturating_sub(1);
            if inline_mods.last() == Some(&depth) {
                inline_mods.pop();
            }
        }
        let preceded = i > 0
            && (bytes[i - 1].is_ascii_alphanumeric() || matches!(bytes[i - 1], b'_' | b'$' | b':'));
        let rest = &code[i..];
        if !preceded && (rest.starts_with("crate::") || rest.starts_with("super::")) {
            let mut base: ModPath;
            let mut after = rest;
            if let Some(tail) = after.strip_prefix("crate::") {
                base = Vec::new();
                after = tail;
            } else {
                let mut ups: usize = 0;
                while let Some(tail) = after.strip_prefix("super::") {
                    ups += 1;
                    after = tail;
                }
                // Inside an inline module `super` first climbs out of it, into the file.
                let in_file = ups.saturating_sub(inline_mods.len());
                base = module.to_vec();
                if in_file > base.len() {
                    i += 1;
                    continue;
                }
                base.truncate(base.len() - in_file);
                if in_file == 0 {
                    // Names the file's own items (or its inline modules): no edge.
                    i += 1;
                    continue;
                }
            }
            parse_tree(after, &mut base, &mut found);
        }
        i += 1;
    }
    found
}

/// The length of a char literal at the start of `text` (`'{'`, `'\''`, `'\u{7b}'`), or 0
/// for a lifetime.
fn char_literal_len(text: &str) -> usize {
    let mut chars = text.char_indices().skip(1);
    match chars.next() {
        Some((_, '\\')) => text[2..].find('\'').map_or(0, |end| end + 3),
        Some((_, _)) => match chars.next() {
            Some((end, '\'')) => end + 1,
            _ => 0,
        },
        None => 0,
    }
}

/// Whether the code right before a `{` is `mod name`.
fn opens_inline_mod(before: &str) -> bool {
    let before = before.trim_end();
    let name_len = before
        .chars()
        .rev()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .map(char::len_utf8)
        .sum::<usize>();
    if name_len == 0 {
        return false;
    }
    let head = before[..before.len() - name_len].trim_end();
    head.strip_suffix("mod").is_some_and(|h| {
        h.chars()
            .last()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_'))
    })
}

/// Parses a use-tree (`a::b::{c, d::*}`, `self`, `*`) after `prefix`, pushing each path.
/// Returns how many bytes it read.
fn parse_tree(text: &str, prefix: &mut ModPath, out: &mut Vec<ModPath>) -> usize {
    let start_len = prefix.len();
    let mut at = 0;
    loop {
        let rest = &text[at..];
        let trimmed = rest.trim_start();
        at += rest.len() - trimmed.len();
        if let Some(group) = trimmed.strip_prefix('{') {
            at += 1;
            let mut inner = 0;
            loop {
                let mut branch = prefix.clone();
                inner += parse_tree(&group[inner..], &mut branch, out);
                let rest = &group[inner..];
                let trimmed = rest.trim_start();
                inner += rest.len() - trimmed.len();
                match trimmed.chars().next() {
                    Some(',') => inner += 1,
                    Some('}') => {
                        inner += 1;
                        break;
                    }
                    _ => break,
                }
            }
            at += inner;
            break;
        }
        let name: String = trimmed
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() || name == "self" {
            at += name.len();
            out.push(prefix.clone());
            break;
        }
        at += name.len();
        prefix.push(name);
        match text[at..].strip_prefix("::") {
            Some(_) => at += 2,
            None => {
                out.push(prefix.clone());
                break;
            }
        }
    }
    prefix.truncate(start_len);
    at
}

/// Sibling edges per (crate, folder): `from → to` with one file that makes it.
type Graphs = BTreeMap<(String, ModPath), BTreeMap<(String, String), String>>;

fn sibling_graphs(files: &[(String, String)]) -> Graphs {
    let places = file_modules(files);
    let mut known: BTreeSet<(String, ModPath)> = BTreeSet::new();
    for (krate, module) in places.values() {
        for len in 0..=module.len() {
            known.insert((krate.clone(), module[..len].to_vec()));
        }
    }
    let mut graphs = Graphs::new();
    for (path, text) in files {
        let Some((krate, module)) = places.get(path) else {
            continue;
        };
        for mut named in named_paths(&code_only(text), module) {
            // Items are not modules: keep the longest prefix that is one.
            while !named.is_empty() && !known.contains(&(krate.clone(), named.clone())) {
                named.pop();
            }
            let common = module
                .iter()
                .zip(&named)
                .take_while(|(a, b)| a == b)
                .count();
            if common < module.len() && common < named.len() {
                graphs
                    .entry((krate.clone(), module[..common].to_vec()))
                    .or_default()
                    .entry((module[common].clone(), named[common].clone()))
                    .or_insert_with(|| path.clone());
            }
        }
    }
    graphs
}

/// Tarjan's strongly connected components with more than one member, each sorted.
fn circles(edges: &BTreeMap<(String, String), String>) -> Vec<Vec<String>> {
    struct State<'a> {
        next: BTreeMap<&'a str, Vec<&'a str>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.next.get(v).cloned().unwrap_or_default() {
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.found.push(component);
            }
        }
    }
    let mut state = State {
        next: BTreeMap::new(),
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for (from, to) in edges.keys() {
        state.next.entry(from).or_default().push(to);
        state.next.entry(to).or_default();
    }
    let nodes: Vec<&str> = state.next.keys().copied().collect();
    for v in nodes {
        if !state.index.contains_key(v) {
            visit(&mut state, v);
        }
    }
    state.found.sort();
    state.found
}

/// One concrete circle through `members`, starting at the first: `a → b → a`, each arrow
/// with a file that draws it.
fn describe(members: &[String], edges: &BTreeMap<(String, String), String>) -> String {
    let inside: BTreeSet<&str> = members.iter().map(String::as_str).collect();
    let start = members[0].as_str();
    let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    let mut last = None;
    'search: while let Some(v) = queue.pop_front() {
        for (from, to) in edges.keys() {
            if from == v && inside.contains(to.as_str()) {
                if to == start {
                    last = Some(v);
                    break 'search;
                }
                if !came_from.contains_key(to.as_str()) {
                    came_from.insert(to, v);
                    queue.push_back(to);
                }
            }
        }
    }
    let mut path = vec![start];
    let mut v = last.unwrap_or(start);
    while v != start {
        path.push(v);
        v = came_from[v];
    }
    path[1..].reverse();
    path.push(start);
    path.windows(2)
        .map(|pair| {
            let file = &edges[&(pair[0].to_string(), pair[1].to_string())];
            format!("{} → {} ({file})", pair[0], pair[1])
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn folder_name(krate: &str, folder: &[String]) -> String {
    let root = if krate.is_empty() {
        "src".to_string()
    } else {
        format!("{krate}/src")
    };
    std::iter::once(root)
        .chain(folder.iter().cloned())
        .collect::<Vec<_>>()
        .join("/")
}

/// Every circle between sibling modules that `allowed` does not cover.
pub(super) fn check_circles_with(
    files: &[(String, String)],
    allowed: &[(&str, &[&str], &str)],
) -> Vec<Violation> {
    let mut found = Vec::new();
    for ((krate, folder), edges) in sibling_graphs(files) {
        let name = folder_name(&krate, &folder);
        for members in circles(&edges) {
            let covered = allowed.iter().any(|(at, list, _)| {
                *at == name && members.iter().all(|m| list.contains(&m.as_str()))
            });
            if !covered {
                found.push(Violation {
                    file: name.clone(),
                    rule: format!(
                        "import circle between {}: {}",
                        members.join(", "),
                        describe(&members, &edges)
                    ),
                });
            }
        }
    }
    found.sort();
    found
}

pub(super) fn check_circles(files: &[(String, String)]) -> Vec<Violation> {
    check_circles_with(files, ALLOWED_CYCLES)
}
