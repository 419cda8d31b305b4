//! Path confinement for the file tools: a path is resolved (`~`, relative to the session's
//! shell directory, symlinks followed) and must land under one of the allowed roots. A
//! symlink that points out of the roots is refused, also when its target does not exist yet.
//! Credential stores are refused for reading and the Hermes config for writing, as in Python
//! `agent/file_safety.py` and `file_tools._check_sensitive_path`.

use std::io;
use std::path::{Component, Path, PathBuf};

use super::context::ToolCtx;

/// Why a path may not be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PathError {
    #[error("Access denied: {path} is outside the allowed directories ({roots})")]
    OutsideRoots { path: String, roots: String },
    #[error("Access denied: {path} contains '..' after a component that does not exist")]
    Traversal { path: String },
    #[error("{message}")]
    Blocked { message: String },
    #[error("Cannot resolve {path}: {message}")]
    Unresolvable { path: String, message: String },
}

/// Expands `~` and `~/...` with the tool environment's `HOME`.
fn expand_tilde(raw: &str, ctx: &ToolCtx) -> PathBuf {
    let home = ctx.env.get("HOME").filter(|h| !h.is_empty());
    match (raw, home) {
        ("~", Some(home)) => PathBuf::from(home),
        (_, Some(home)) if raw.starts_with("~/") => Path::new(home).join(&raw[2..]),
        _ => PathBuf::from(raw),
    }
}

fn canonical_roots(ctx: &ToolCtx) -> Vec<PathBuf> {
    ctx.allowed_roots
        .iter()
        .filter_map(|r| std::fs::canonicalize(r).ok())
        .collect()
}

/// Resolves symlinks in the existing part of `path`; the missing rest is appended after
/// checking that it neither climbs (`..`) nor starts at a dangling symlink.
fn resolve_existing_prefix(path: &Path, shown: &str) -> Result<PathBuf, PathError> {
    match std::fs::canonicalize(path) {
        Ok(resolved) => return Ok(resolved),
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            return Err(PathError::Unresolvable {
                path: shown.to_owned(),
                message: e.to_string(),
            });
        }
        Err(_) => {}
    }
    // `current` does not exist: peel components off until an ancestor does.
    let mut tail: Vec<PathBuf> = Vec::new();
    let mut current = path.to_path_buf();
    loop {
        if matches!(current.components().next_back(), Some(Component::ParentDir)) {
            return Err(PathError::Traversal {
                path: shown.to_owned(),
            });
        }
        let Some(name) = current.file_name().map(PathBuf::from) else {
            return Err(PathError::Unresolvable {
                path: shown.to_owned(),
                message: "no existing parent directory".to_owned(),
            });
        };
        tail.push(name);
        current.pop();
        match std::fs::canonicalize(&current) {
            Ok(mut resolved) => {
                for (i, part) in tail.iter().rev().enumerate() {
                    resolved.push(part);
                    // The first missing component must really be missing: a dangling
                    // symlink there would be followed by the write.
                    if i == 0 && std::fs::symlink_metadata(&resolved).is_ok() {
                        return Err(PathError::Unresolvable {
                            path: shown.to_owned(),
                            message: "a dangling symlink is in the way".to_owned(),
                        });
                    }
                }
                return Ok(resolved);
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(PathError::Unresolvable {
                    path: shown.to_owned(),
                    message: e.to_string(),
                });
            }
        }
    }
}

/// The absolute, symlink-free path `raw` names, if it lies under an allowed root.
pub fn resolve(ctx: &ToolCtx, raw: &str) -> Result<PathBuf, PathError> {
    let expanded = expand_tilde(raw, ctx);
    let joined = if expanded.is_absolute() {
        expanded
    } else {
        ctx.shell_cwd().join(expanded)
    };
    let resolved = resolve_existing_prefix(&joined, raw)?;
    let roots = canonical_roots(ctx);
    if roots.iter().any(|root| resolved.starts_with(root)) {
        Ok(resolved)
    } else {
        Err(PathError::OutsideRoots {
            path: raw.to_owned(),
            roots: ctx
                .allowed_roots
                .iter()
                .map(|r| r.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        })
    }
}

const CREDENTIAL_FILES: [&str; 7] = [
    "auth.json",
    "auth.lock",
    ".anthropic_oauth.json",
    ".env",
    "webhook_subscriptions.json",
    "auth/google_oauth.json",
    "cache/bws_cache.json",
];

const PROJECT_ENV_NAMES: [&str; 7] = [
    ".env",
    ".env.local",
    ".env.development",
    ".env.production",
    ".env.test",
    ".env.staging",
    ".envrc",
];

fn hermes_home(ctx: &ToolCtx) -> PathBuf {
    std::fs::canonicalize(ctx.home.path()).unwrap_or_else(|_| ctx.home.path().to_path_buf())
}

/// Why reading `resolved` is refused (credential stores, secret `.env` files), if it is.
pub fn read_block_error(ctx: &ToolCtx, resolved: &Path, shown: &str) -> Option<String> {
    let home = hermes_home(ctx);
    let defense = "(This guard only protects the file tools, not the terminal.)";
    if resolved.starts_with(home.join("skills").join(".hub")) {
        return Some(format!(
            "Access denied: {shown} is Hermes's skills-hub cache; its contents could carry injected instructions, so it is not readable here."
        ));
    }
    if CREDENTIAL_FILES
        .iter()
        .any(|name| resolved == home.join(name))
    {
        return Some(format!(
            "Access denied: {shown} holds Hermes credentials, which only Hermes itself uses. {defense}"
        ));
    }
    let tokens = home.join("mcp-tokens");
    if resolved == tokens {
        return Some(format!(
            "Access denied: {shown} is where Hermes keeps MCP tokens. {defense}"
        ));
    }
    if resolved.starts_with(&tokens) {
        return Some(format!(
            "Access denied: {shown} is a Hermes MCP token. {defense}"
        ));
    }
    let name = resolved.file_name()?.to_str()?.to_lowercase();
    PROJECT_ENV_NAMES.contains(&name.as_str()).then(|| format!(
        "Access denied: {shown} is an environment file and likely holds secrets. For its layout, read .env.example. {defense}"
    ))
}

const SENSITIVE_PREFIXES: [&str; 5] = [
    "/etc/",
    "/boot/",
    "/usr/lib/systemd/",
    "/private/etc/",
    "/private/var/",
];

/// Why writing `resolved` is refused (the Hermes config, credentials, the state database,
/// system paths), if it is.
pub fn write_block_error(ctx: &ToolCtx, resolved: &Path, shown: &str) -> Option<String> {
    let text = resolved.display().to_string();
    if SENSITIVE_PREFIXES.iter().any(|p| text.starts_with(p)) {
        return Some(format!(
            "Not written: {shown} is a system path. Change system files through terminal with sudo."
        ));
    }
    let home = hermes_home(ctx);
    if resolved == home.join("config.yaml") {
        return Some(format!(
            "Not written: {shown} is the Hermes configuration, which sets the agent's own safety rules. The user edits it (~/.hermes/config.yaml or 'hermes config')."
        ));
    }
    let protected = [
        ".env",
        ".anthropic_oauth.json",
        "auth.json",
        "state.db",
        "state.db-wal",
        "state.db-shm",
    ];
    if protected.iter().any(|name| resolved == home.join(name)) {
        return Some(format!(
            "Write denied: '{shown}' holds Hermes credentials or state."
        ));
    }
    None
}
