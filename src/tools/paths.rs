//! Path confinement for the file tools: a path is resolved (`~`, relative to the session's
//! shell directory, symlinks followed) and must land under one of the allowed roots. A
//! symlink that points out of the roots is refused, also when its target does not exist yet.
//! What may be read or written beyond that is decided by the one list of protected places in
//! [`super::sensitive`] (plus the skills-hub cache and project `.env` files for reading):
//! [`Walls`] judges a path both resolved and as given.

use std::io;
use std::path::{Component, Path, PathBuf};

use super::context::ToolCtx;
use super::sensitive::{self, Guarded, Places};

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

const PROJECT_ENV_NAMES: [&str; 7] = [
    ".env",
    ".env.local",
    ".env.development",
    ".env.production",
    ".env.test",
    ".env.staging",
    ".envrc",
];

/// The absolute path `raw` names as given: `~` expanded, joined to the shell's directory,
/// `.` and `..` folded, symlinks not followed. The walls judge this as well as the resolved
/// path, so a link cannot disguise a protected place (nor a protected name an ordinary one).
pub fn as_given(ctx: &ToolCtx, raw: &str) -> PathBuf {
    let expanded = expand_tilde(raw, ctx);
    let joined = if expanded.is_absolute() {
        expanded
    } else {
        ctx.shell_cwd().join(expanded)
    };
    sensitive::fold(&joined)
}

/// The protected places of one tool call ([`sensitive::Places`]), for the user's home as
/// the environment names it and as it resolves.
#[derive(Debug, Clone)]
pub struct Walls {
    places: Vec<Places>,
    skills_hub: PathBuf,
}

/// Why a file tool may not read a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadWall {
    /// One of the protected places of [`sensitive`].
    Guarded(Guarded),
    /// The skills hub's download cache (it may carry injected instructions).
    SkillsHub,
    /// A project's `.env`-style file.
    ProjectEnv,
}

impl ReadWall {
    /// Short reason for a listing of skipped files.
    pub fn reason(&self) -> &'static str {
        match self {
            ReadWall::Guarded(guarded) => guarded.what,
            ReadWall::SkillsHub => "the skills-hub cache",
            ReadWall::ProjectEnv => "an environment file",
        }
    }

    /// The refusal the model sees when it names the file.
    pub fn message(&self, shown: &str) -> String {
        let defense = "(This guard only protects the file tools, not the terminal.)";
        match self {
            ReadWall::SkillsHub => format!(
                "Access denied: {shown} is Hermes's skills-hub cache; its contents could carry injected instructions, so it is not readable here."
            ),
            ReadWall::ProjectEnv => format!(
                "Access denied: {shown} is an environment file and likely holds secrets. For its layout, read .env.example. {defense}"
            ),
            ReadWall::Guarded(guarded) if guarded.key == "hermes-secrets" => format!(
                "Access denied: {shown} holds Hermes credentials (API keys, tokens), which only Hermes itself uses. {defense}"
            ),
            ReadWall::Guarded(guarded) => format!(
                "Access denied: {shown} is {}, which hands over a secret; the file tools do not read it. {defense}",
                guarded.what
            ),
        }
    }
}

impl Walls {
    pub fn of(ctx: &ToolCtx) -> Self {
        let user_home = ctx
            .env
            .get("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from);
        let mut places = vec![Places::new(user_home.as_deref(), ctx.home.path())];
        if let Some(real) = user_home
            .as_deref()
            .and_then(|h| std::fs::canonicalize(h).ok())
            .filter(|real| Some(real.as_path()) != user_home.as_deref())
        {
            places.push(Places::new(Some(&real), ctx.home.path()));
        }
        Walls {
            places,
            skills_hub: hermes_home(ctx).join("skills").join(".hub"),
        }
    }

    /// Why writing `path` needs the user's approval, if it does.
    pub fn guard_write(&self, path: &Path) -> Option<Guarded> {
        self.places.iter().find_map(|p| p.guard_write(path))
    }

    /// Why reading `path` is refused, if it is.
    pub fn guard_read(&self, path: &Path) -> Option<ReadWall> {
        if path.starts_with(&self.skills_hub) {
            return Some(ReadWall::SkillsHub);
        }
        if let Some(guarded) = self.places.iter().find_map(|p| p.guard_read(path)) {
            return Some(ReadWall::Guarded(guarded));
        }
        let name = path.file_name()?.to_str()?.to_lowercase();
        PROJECT_ENV_NAMES
            .contains(&name.as_str())
            .then_some(ReadWall::ProjectEnv)
    }
}

fn hermes_home(ctx: &ToolCtx) -> PathBuf {
    std::fs::canonicalize(ctx.home.path()).unwrap_or_else(|_| ctx.home.path().to_path_buf())
}

/// Why reading `resolved` is refused (credential stores, secret `.env` files, the places
/// [`sensitive`] lists for reading), if it is.
pub fn read_block_error(ctx: &ToolCtx, resolved: &Path, shown: &str) -> Option<String> {
    let walls = Walls::of(ctx);
    walls
        .guard_read(resolved)
        .or_else(|| walls.guard_read(&as_given(ctx, shown)))
        .map(|wall| wall.message(shown))
}

/// The refusal for writing `shown`, a place [`sensitive`] protects, when no approval was
/// given (or none could be asked for).
pub fn write_refusal(guarded: Guarded, shown: &str, why: &str) -> String {
    let what = match guarded.key {
        "system" => "a system path (change system files through the terminal, with sudo)",
        _ => guarded.what,
    };
    format!(
        "Not written: {shown} is {what}. Changing it needs the user's approval, and {why}. Ask the user to make this change themselves if they want it."
    )
}

/// Why writing `resolved` (named `shown`) touches a protected place, judged on the resolved
/// path and on the path as given: the guarded place, if any.
pub fn write_guard(ctx: &ToolCtx, resolved: &Path, shown: &str) -> Option<Guarded> {
    let walls = Walls::of(ctx);
    walls
        .guard_write(resolved)
        .or_else(|| walls.guard_write(&as_given(ctx, shown)))
}

/// Why writing `resolved` is refused when no approval was given for it (the Hermes config,
/// credentials, the state database, the pairing store, scripts, SSH, shell start-up files,
/// system paths: everything [`sensitive`] lists for writing), if it is.
pub fn write_block_error(ctx: &ToolCtx, resolved: &Path, shown: &str) -> Option<String> {
    write_guard(ctx, resolved, shown)
        .map(|guarded| write_refusal(guarded, shown, "none was given for this write"))
}
