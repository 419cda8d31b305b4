//! Parser and applier for V4A patches, the multi-file edit format coding agents emit: one
//! patch can change, create, remove and rename files. Every hunk is checked before the disk
//! is touched, so one hunk that fails leaves every file as it was. A hunk's context has to
//! match exactly; unlike the Python implementation there is no fuzzy second try.

use std::path::PathBuf;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Value, json};

use super::diff::unified_diff;
use super::edit::{ReplaceError, read_text, replace_exact, write_preserving};
use super::guard::unapproved;
use super::text::strip_bom;
use crate::tools::context::ToolCtx;
use crate::tools::paths::resolve;
use crate::tools::tool_error;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperationKind {
    Add,
    Update,
    Delete,
    Move,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hunk {
    pub context_hint: Option<String>,
    /// `(prefix, text)` with prefix `' '`, `'-'` or `'+'`.
    pub lines: Vec<(char, String)>,
}

/// One file operation of a patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatchOperation {
    pub kind: OperationKind,
    pub path: String,
    pub new_path: Option<String>,
    pub hunks: Vec<Hunk>,
}

static UPDATE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\*\*\*\s*Update\s+File:\s*(.+)").expect("regex"));
static ADD: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\*\*\*\s*Add\s+File:\s*(.+)").expect("regex"));
static DELETE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\*\*\*\s*Delete\s+File:\s*(.+)").expect("regex"));
static MOVE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\*\*\*\s*Move\s+File:\s*(.+?)\s*->\s*(.+)").expect("regex"));
static HINT: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^@@\s*(.+?)\s*@@").expect("regex"));

fn close(op: Option<PatchOperation>, hunk: Option<Hunk>, ops: &mut Vec<PatchOperation>) {
    if let Some(mut op) = op {
        if let Some(hunk) = hunk.filter(|h| !h.lines.is_empty()) {
            op.hunks.push(hunk);
        }
        ops.push(op);
    }
}

/// One malformed operation of a patch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OperationProblem {
    #[error("Operation with empty file path")]
    EmptyPath,
    #[error("UPDATE '{path}': no hunks found")]
    NoHunks { path: String },
    #[error("MOVE '{path}': missing destination path (expected 'src -> dst')")]
    NoDestination { path: String },
}

/// A patch that does not parse: every malformed operation, in patch order.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Parse error: {}", join_problems(.0))]
pub struct PatchParseError(pub Vec<OperationProblem>);

fn join_problems(problems: &[OperationProblem]) -> String {
    let texts: Vec<String> = problems.iter().map(ToString::to_string).collect();
    texts.join("; ")
}

/// A hunk of an update that cannot be placed in the file's current text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum HunkError {
    #[error("{path}: addition-only hunk context hint '{hint}' not found")]
    AnchorMissing { path: String, hint: String },
    #[error("{path}: the hunk only adds lines, and its anchor '{hint}' occurs {count} times")]
    AnchorAmbiguous {
        path: String,
        hint: String,
        count: usize,
    },
    /// `number` counts from 1; `label` is the quoted context hint or "(no hint)".
    #[error("{path}: hunk {number} {label} not found — {source}")]
    NoMatch {
        path: String,
        number: usize,
        label: String,
        source: ReplaceError,
    },
}

/// Parses a V4A patch; an error names every malformed operation.
pub fn parse_v4a_patch(text: &str) -> Result<Vec<PatchOperation>, PatchParseError> {
    let lines: Vec<&str> = text.split('\n').collect();
    let start = lines
        .iter()
        .position(|l| l.contains("*** Begin Patch") || l.contains("***Begin Patch"))
        .map_or(0, |i| i + 1);
    let end = lines
        .iter()
        .position(|l| l.contains("*** End Patch") || l.contains("***End Patch"))
        .unwrap_or(lines.len());
    let mut ops = Vec::new();
    let mut current: Option<PatchOperation> = None;
    let mut hunk: Option<Hunk> = None;
    for line in lines.iter().take(end).skip(start) {
        let header = |kind, path: &str| PatchOperation {
            kind,
            path: path.trim().to_owned(),
            new_path: None,
            hunks: Vec::new(),
        };
        if let Some(c) = UPDATE.captures(line) {
            close(current.take(), hunk.take(), &mut ops);
            current = Some(header(OperationKind::Update, &c[1]));
        } else if let Some(c) = ADD.captures(line) {
            close(current.take(), hunk.take(), &mut ops);
            current = Some(header(OperationKind::Add, &c[1]));
            hunk = Some(Hunk::default());
        } else if let Some(c) = DELETE.captures(line) {
            close(current.take(), hunk.take(), &mut ops);
            ops.push(header(OperationKind::Delete, &c[1]));
        } else if let Some(c) = MOVE.captures(line) {
            close(current.take(), hunk.take(), &mut ops);
            let mut op = header(OperationKind::Move, &c[1]);
            op.new_path = Some(c[2].trim().to_owned());
            ops.push(op);
        } else if line.starts_with("@@") {
            if let Some(op) = current.as_mut() {
                if let Some(h) = hunk.take().filter(|h| !h.lines.is_empty()) {
                    op.hunks.push(h);
                }
                hunk = Some(Hunk {
                    context_hint: HINT.captures(line).map(|c| c[1].to_owned()),
                    lines: Vec::new(),
                });
            }
        } else if current.is_some() && !line.is_empty() {
            let h = hunk.get_or_insert_with(Hunk::default);
            match line.chars().next() {
                Some(p @ ('+' | '-' | ' ')) => h.lines.push((p, line[1..].to_owned())),
                Some('\\') => {}
                _ => h.lines.push((' ', (*line).to_owned())),
            }
        }
    }
    close(current, hunk, &mut ops);
    let mut errors = Vec::new();
    for op in &ops {
        if op.path.is_empty() {
            errors.push(OperationProblem::EmptyPath);
        }
        if op.kind == OperationKind::Update && op.hunks.is_empty() {
            errors.push(OperationProblem::NoHunks {
                path: op.path.clone(),
            });
        }
        if op.kind == OperationKind::Move && op.new_path.as_deref().is_none_or(str::is_empty) {
            errors.push(OperationProblem::NoDestination {
                path: op.path.clone(),
            });
        }
    }
    if errors.is_empty() {
        Ok(ops)
    } else {
        Err(PatchParseError(errors))
    }
}

fn hunk_parts(hunk: &Hunk) -> (Vec<&str>, Vec<&str>, bool) {
    let search: Vec<&str> = hunk
        .lines
        .iter()
        .filter(|(p, _)| *p != '+')
        .map(|(_, l)| l.as_str())
        .collect();
    let replace: Vec<&str> = hunk
        .lines
        .iter()
        .filter(|(p, _)| *p != '-')
        .map(|(_, l)| l.as_str())
        .collect();
    let changes = hunk.lines.iter().any(|(p, _)| *p != ' ');
    (search, replace, changes)
}

/// Applies the hunks of an update to `content`, or says which hunk failed.
fn apply_hunks(path: &str, content: &str, hunks: &[Hunk]) -> Result<String, HunkError> {
    let mut current = content.to_owned();
    for (index, hunk) in hunks.iter().enumerate() {
        let (search, replace, changes) = hunk_parts(hunk);
        if !changes {
            continue;
        }
        let insert = replace.join("\n");
        if search.is_empty() {
            match &hunk.context_hint {
                Some(hint) => match current.matches(hint.as_str()).count() {
                    0 => {
                        return Err(HunkError::AnchorMissing {
                            path: path.to_owned(),
                            hint: hint.clone(),
                        });
                    }
                    1 => {
                        let at = current.find(hint.as_str()).unwrap_or(0);
                        match current[at..].find('\n') {
                            Some(eol) => current.insert_str(at + eol + 1, &format!("{insert}\n")),
                            None => current = format!("{current}\n{insert}"),
                        }
                    }
                    count => {
                        return Err(HunkError::AnchorAmbiguous {
                            path: path.to_owned(),
                            hint: hint.clone(),
                            count,
                        });
                    }
                },
                None => current = format!("{}\n{insert}\n", current.trim_end_matches('\n')),
            }
            continue;
        }
        match replace_exact(&current, &search.join("\n"), &insert, false) {
            Ok(updated) => current = updated,
            Err(source) => {
                let label = hunk
                    .context_hint
                    .as_ref()
                    .map_or("(no hint)".to_owned(), |h| format!("'{h}'"));
                return Err(HunkError::NoMatch {
                    path: path.to_owned(),
                    number: index + 1,
                    label,
                    source,
                });
            }
        }
    }
    Ok(current)
}

fn traversal_error(path: &str) -> Option<String> {
    std::path::Path::new(path)
        .components()
        .any(|c| matches!(c, std::path::Component::ParentDir))
        .then(|| tool_error(format!(
            "V4A file header {path:?} climbs out with '..'. Name files by an absolute path or one below the working directory."
        )))
}

/// Every path a V4A patch writes (sources and move targets); none when it does not parse.
pub fn patch_paths(text: &str) -> Vec<String> {
    parse_v4a_patch(text)
        .map(|ops| {
            ops.into_iter()
                .flat_map(|op| std::iter::once(op.path).chain(op.new_path))
                .collect()
        })
        .unwrap_or_default()
}

/// Validates, then applies a V4A patch; returns the tool result. A protected path must be
/// among `approved` (see [`super::guard`]).
pub fn apply_v4a(ctx: &ToolCtx, text: &str, approved: &[PathBuf]) -> String {
    let ops = match parse_v4a_patch(text) {
        Ok(ops) => ops,
        Err(e) => {
            return json!({"success": false, "error": format!("Failed to parse patch: {e}")})
                .to_string();
        }
    };
    // Resolve and check every path before touching anything.
    let mut resolved_paths: Vec<(String, PathBuf)> = Vec::new();
    for op in &ops {
        for raw in std::iter::once(&op.path).chain(op.new_path.as_ref()) {
            if let Some(error) = traversal_error(raw) {
                return error;
            }
            let resolved = match resolve(ctx, raw) {
                Ok(p) => p,
                Err(e) => return tool_error(e.to_string()),
            };
            if let Some(message) = unapproved(ctx, &resolved, raw, approved) {
                return tool_error(message);
            }
            resolved_paths.push((raw.clone(), resolved));
        }
    }
    let path_of = |raw: &str| {
        resolved_paths
            .iter()
            .find(|(r, _)| r == raw)
            .map(|(_, p)| p.clone())
            .unwrap_or_default()
    };
    // Phase 1: validate.
    let mut errors = Vec::new();
    let mut updates: Vec<(usize, String, String)> = Vec::new();
    let mut real_changes = 0;
    for (i, op) in ops.iter().enumerate() {
        let path = path_of(&op.path);
        match op.kind {
            OperationKind::Update => match read_text(&path) {
                None => errors.push(format!("{}: File not found: {}", op.path, op.path)),
                Some(original) => {
                    real_changes += op.hunks.iter().filter(|h| hunk_parts(h).2).count();
                    let (content, _) = strip_bom(&original);
                    match apply_hunks(&op.path, content, &op.hunks) {
                        Ok(updated) => updates.push((i, content.to_owned(), updated)),
                        Err(e) => errors.push(e.to_string()),
                    }
                }
            },
            OperationKind::Delete => {
                real_changes += 1;
                if !path.is_file() {
                    errors.push(format!("{}: file not found for deletion", op.path));
                }
            }
            OperationKind::Move => {
                real_changes += 1;
                let dst = op.new_path.as_deref().unwrap_or_default();
                if !path.is_file() {
                    errors.push(format!("{}: source file not found for move", op.path));
                }
                if path_of(dst).exists() {
                    errors.push(format!(
                        "{dst}: destination already exists — move would overwrite"
                    ));
                }
            }
            OperationKind::Add => real_changes += 1,
        }
    }
    if errors.is_empty() && real_changes == 0 {
        errors.push("The patch changes nothing: it has context lines only".to_owned());
    }
    if !errors.is_empty() {
        let listed: Vec<String> = errors.iter().map(|e| format!("  • {e}")).collect();
        return json!({"success": false,
            "error": format!("Patch validation failed (no files were modified):\n{}", listed.join("\n"))})
        .to_string();
    }
    // Phase 2: apply.
    let (mut modified, mut created, mut deleted, mut diffs, mut failures) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (i, op) in ops.iter().enumerate() {
        let path = path_of(&op.path);
        match op.kind {
            OperationKind::Add => {
                let lines: Vec<&str> = op
                    .hunks
                    .iter()
                    .flat_map(|h| &h.lines)
                    .filter(|(p, _)| *p == '+')
                    .map(|(_, l)| l.as_str())
                    .collect();
                match write_preserving(&path, &op.path, &lines.join("\n")) {
                    Ok(_) => {
                        created.push(op.path.clone());
                        let body: Vec<String> = lines.iter().map(|l| format!("+{l}")).collect();
                        diffs.push(format!(
                            "--- /dev/null\n+++ b/{}\n{}",
                            op.path,
                            body.join("\n")
                        ));
                    }
                    Err(e) => failures.push(format!("Failed to add {}: {e}", op.path)),
                }
            }
            OperationKind::Update => {
                let Some((_, before, after)) = updates.iter().find(|(j, _, _)| *j == i) else {
                    continue;
                };
                match write_preserving(&path, &op.path, after) {
                    Ok(_) => {
                        modified.push(op.path.clone());
                        diffs.push(unified_diff(
                            before,
                            after,
                            &format!("a/{}", op.path),
                            &format!("b/{}", op.path),
                        ));
                    }
                    Err(e) => failures.push(format!("Failed to update {}: {e}", op.path)),
                }
            }
            OperationKind::Delete => {
                let before = read_text(&path).unwrap_or_default();
                match std::fs::remove_file(&path) {
                    Ok(()) => {
                        deleted.push(op.path.clone());
                        let diff =
                            unified_diff(&before, "", &format!("a/{}", op.path), "/dev/null");
                        diffs.push(if diff.is_empty() {
                            format!("# Deleted: {}", op.path)
                        } else {
                            diff
                        });
                    }
                    Err(e) => failures.push(format!("Failed to delete {}: {e}", op.path)),
                }
            }
            OperationKind::Move => {
                let dst_raw = op.new_path.clone().unwrap_or_default();
                let dst = path_of(&dst_raw);
                let moved = dst
                    .parent()
                    .map_or(Ok(()), std::fs::create_dir_all)
                    .and_then(|()| std::fs::rename(&path, &dst));
                match moved {
                    Ok(()) => {
                        modified.push(format!("{} -> {dst_raw}", op.path));
                        diffs.push(format!("# Moved: {} -> {dst_raw}", op.path));
                    }
                    Err(e) => failures.push(format!("Failed to move {}: {e}", op.path)),
                }
            }
        }
    }
    let mut result = json!({"success": failures.is_empty()});
    let diff = diffs.join("\n");
    if !diff.is_empty() {
        result["diff"] = json!(diff);
    }
    if !modified.is_empty() {
        result["files_modified"] = json!(modified);
    }
    if !created.is_empty() {
        result["files_created"] = json!(created);
    }
    if !deleted.is_empty() {
        result["files_deleted"] = json!(deleted);
    }
    if failures.is_empty() {
        let all: Vec<String> = resolved_paths
            .iter()
            .map(|(_, p)| p.display().to_string())
            .collect();
        if all.len() == 1 {
            result["resolved_path"] = json!(all[0]);
        }
        result["files_modified"] = Value::from(all);
    } else {
        let listed: Vec<String> = failures.iter().map(|e| format!("  • {e}")).collect();
        result["error"] = json!(format!(
            "Writing the patched files failed part way, so some may be changed and others not (`git diff` shows which):\n{}",
            listed.join("\n")
        ));
    }
    result.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_operation() {
        let ops = parse_v4a_patch(
            "*** Begin Patch\n*** Update File: a.txt\n@@ fn main @@\n ctx\n-old\n+new\n*** Add File: b.txt\n+one\n*** Delete File: c.txt\n*** Move File: d.txt -> e.txt\n*** End Patch",
        )
        .unwrap();
        assert_eq!(ops.len(), 4);
        assert_eq!(ops[0].kind, OperationKind::Update);
        assert_eq!(ops[0].hunks[0].context_hint.as_deref(), Some("fn main"));
        assert_eq!(
            ops[0].hunks[0].lines,
            vec![
                (' ', "ctx".to_owned()),
                ('-', "old".into()),
                ('+', "new".into())
            ]
        );
        assert_eq!(ops[1].hunks[0].lines, vec![('+', "one".to_owned())]);
        assert_eq!(ops[2].kind, OperationKind::Delete);
        assert_eq!(ops[3].new_path.as_deref(), Some("e.txt"));
        let err = parse_v4a_patch("*** Update File: a.txt\n*** End Patch")
            .unwrap_err()
            .to_string();
        assert_eq!(err, "Parse error: UPDATE 'a.txt': no hunks found");
    }

    #[test]
    fn hunks_apply_in_order_and_fail_without_a_match() {
        let hunk = |lines: &[(char, &str)]| Hunk {
            context_hint: None,
            lines: lines.iter().map(|(p, l)| (*p, (*l).to_owned())).collect(),
        };
        let content = "a\nb\nc\n";
        let out = apply_hunks(
            "f",
            content,
            &[
                hunk(&[(' ', "a"), ('-', "b"), ('+', "B")]),
                hunk(&[('-', "c"), ('+', "C")]),
            ],
        )
        .unwrap();
        assert_eq!(out, "a\nB\nC\n");
        let err = apply_hunks("f", content, &[hunk(&[('-', "zz"), ('+', "y")])])
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("f: hunk 1 (no hint) not found"), "{err}");
        let appended = apply_hunks("f", content, &[hunk(&[('+', "d")])]).unwrap();
        assert_eq!(appended, "a\nb\nc\nd\n");
    }
}
