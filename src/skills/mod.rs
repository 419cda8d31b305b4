//! Skills: task instructions a Hermes home keeps under `skills/**/SKILL.md` (YAML
//! frontmatter + markdown body, optional `references/`, `templates/`, `scripts/`, `assets/`
//! beside it). Found the way Hermes 0.19 finds them: the home's directory first, then
//! `skills.external_dirs`; skills for another OS (`platforms:`) are left out, and
//! `skills.disabled` / `skills.platform_disabled.<platform>` hide a skill by name.
//!
//! The prompt carries only the index (`index.rs`); the tools in `tools::skills` load a body
//! or a linked file when the agent asks, and each skill is a slash command in chat.

pub mod command;
pub mod frontmatter;
pub mod index;
pub mod template;

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::config::SkillsConfig;
use crate::home::HermesHome;

/// Directories never searched for skills (VCS, virtualenvs, caches, Hermes's hub metadata).
const EXCLUDED_DIRS: &[&str] = &[
    ".git",
    ".github",
    ".hub",
    ".archive",
    ".venv",
    "venv",
    "node_modules",
    "site-packages",
    "__pycache__",
    ".tox",
    ".nox",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
];

/// A skill's own support directories: files loaded on demand, never skills themselves.
pub const SUPPORT_DIRS: &[&str] = &["references", "templates", "assets", "scripts"];

/// How deep the walk goes (symlinks are followed, so a loop must end somewhere).
const MAX_DEPTH: usize = 8;

/// The longest description the index shows (Hermes cuts at 60 characters).
const INDEX_DESCRIPTION_CHARS: usize = 60;

/// One skill found on disk.
#[derive(Debug, Clone, PartialEq)]
pub struct Skill {
    /// `name:` from the frontmatter, else the directory name.
    pub name: String,
    /// The directory holding SKILL.md.
    pub dir: PathBuf,
    /// Hermes's category: the path above the skill's directory (or its first component).
    pub category: String,
    pub description: String,
    pub frontmatter: Map<String, Value>,
}

impl Skill {
    pub fn skill_md(&self) -> PathBuf {
        self.dir.join("SKILL.md")
    }

    /// The description as the index shows it: one line, at most 60 characters.
    pub fn short_description(&self) -> String {
        let one_line = self
            .description
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        if one_line.chars().count() <= INDEX_DESCRIPTION_CHARS {
            return one_line;
        }
        let cut: String = one_line.chars().take(INDEX_DESCRIPTION_CHARS - 3).collect();
        format!("{cut}...")
    }

    /// The directory's own name (skills are also found by it).
    pub fn dir_name(&self) -> &str {
        self.dir.file_name().and_then(|n| n.to_str()).unwrap_or("")
    }
}

/// Where skills are looked for: the home's `skills/` first, then the external directories
/// (`~` and `${VAR}` expanded from `env`).
pub fn skill_dirs(
    home: &HermesHome,
    config: &SkillsConfig,
    env: &std::collections::BTreeMap<String, String>,
) -> Vec<PathBuf> {
    let mut dirs = vec![home.path().join("skills")];
    for raw in &config.external_dirs {
        let expanded = expand(raw, env);
        if !dirs.contains(&expanded) {
            dirs.push(expanded);
        }
    }
    dirs
}

fn expand(raw: &str, env: &std::collections::BTreeMap<String, String>) -> PathBuf {
    let mut text = raw.to_owned();
    for (key, value) in env {
        text = text.replace(&format!("${{{key}}}"), value);
    }
    match text.strip_prefix("~/").zip(env.get("HOME")) {
        Some((rest, home)) => Path::new(home).join(rest),
        None => PathBuf::from(text),
    }
}

/// Every skill in `dirs` usable on this OS, sorted by path within each directory; a name
/// found in an earlier directory hides the same name later (the home wins).
pub fn discover(dirs: &[PathBuf]) -> Vec<Skill> {
    let mut seen = HashSet::new();
    let mut skills = Vec::new();
    for root in dirs {
        let mut files = Vec::new();
        walk(root, 0, &mut files);
        files.sort();
        for skill_md in files {
            let Some(skill) = read_skill(root, &skill_md) else {
                continue;
            };
            if matches_this_os(&skill.frontmatter) && seen.insert(skill.name.clone()) {
                skills.push(skill);
            }
        }
    }
    skills
}

fn walk(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let has_skill = dir.join("SKILL.md").is_file();
    if has_skill {
        out.push(dir.join("SKILL.md"));
    }
    if depth >= MAX_DEPTH {
        return;
    }
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let skip = EXCLUDED_DIRS.contains(&name) || (has_skill && SUPPORT_DIRS.contains(&name));
        if !skip && entry.path().is_dir() {
            walk(&entry.path(), depth + 1, out);
        }
    }
}

fn read_skill(root: &Path, skill_md: &Path) -> Option<Skill> {
    let content = match std::fs::read_to_string(skill_md) {
        Ok(content) => content,
        Err(e) => {
            tracing::warn!(path = %skill_md.display(), error = %e, "cannot read a skill");
            return None;
        }
    };
    let (frontmatter, _) = frontmatter::split(&content);
    let dir = skill_md.parent()?.to_path_buf();
    let dir_name = dir.file_name()?.to_str()?.to_owned();
    let relative: Vec<String> = dir
        .strip_prefix(root)
        .ok()?
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let category = match relative.len() {
        0 => "general".to_owned(),
        1 => relative[0].clone(),
        n => relative[..n - 1].join("/"),
    };
    Some(Skill {
        name: frontmatter::text(&frontmatter, "name").unwrap_or(dir_name),
        category,
        description: frontmatter::text(&frontmatter, "description").unwrap_or_default(),
        dir,
        frontmatter,
    })
}

/// `platforms: [macos, linux]` in the frontmatter limits a skill to those systems (names as
/// Hermes spells them); no list means every system.
fn matches_this_os(frontmatter: &Map<String, Value>) -> bool {
    let platforms = frontmatter::strings(frontmatter.get("platforms"));
    if platforms.is_empty() {
        return true;
    }
    let current = if cfg!(target_os = "macos") {
        "darwin"
    } else if cfg!(windows) {
        "win32"
    } else {
        "linux"
    };
    platforms.iter().any(|p| {
        let p = p.to_lowercase();
        let mapped = match p.as_str() {
            "macos" => "darwin",
            "windows" => "win32",
            other => other,
        };
        current.starts_with(mapped)
    })
}

/// Whether the configuration hides `skill` on `platform` (`None`: only the global list).
pub fn is_disabled(config: &SkillsConfig, platform: Option<&str>, skill: &Skill) -> bool {
    let hit = |names: &[String]| {
        names
            .iter()
            .any(|n| n == &skill.name || n == skill.dir_name())
    };
    hit(&config.disabled)
        || platform
            .and_then(|p| config.platform_disabled.get(p))
            .is_some_and(|names| hit(names))
}

/// The skills the agent may use on `platform`.
pub fn enabled(
    home: &HermesHome,
    config: &SkillsConfig,
    env: &std::collections::BTreeMap<String, String>,
    platform: Option<&str>,
) -> Vec<Skill> {
    discover(&skill_dirs(home, config, env))
        .into_iter()
        .filter(|skill| !is_disabled(config, platform, skill))
        .collect()
}

/// Hermes's conditional activation (`metadata.hermes` in the frontmatter): a skill that
/// `requires_tools`/`requires_toolsets` the agent lacks, or that is only a
/// `fallback_for_tools`/`fallback_for_toolsets` the agent has, stays out of the index (it
/// can still be loaded by name).
pub fn fits_tools(skill: &Skill, tools: &[String], toolsets: &[String]) -> bool {
    let Some(Value::Object(hermes)) = skill
        .frontmatter
        .get("metadata")
        .and_then(|m| m.get("hermes"))
    else {
        return true;
    };
    let list = |key: &str| frontmatter::strings(hermes.get(key));
    let has = |names: &[String], name: &String| names.contains(name);
    list("fallback_for_toolsets")
        .iter()
        .all(|t| !has(toolsets, t))
        && list("fallback_for_tools").iter().all(|t| !has(tools, t))
        && list("requires_toolsets").iter().all(|t| has(toolsets, t))
        && list("requires_tools").iter().all(|t| has(tools, t))
}

/// Finds a skill by its name, its directory's name, or its path under a skills directory
/// (`category/name`).
pub fn find<'a>(skills: &'a [Skill], wanted: &str) -> Option<&'a Skill> {
    let wanted = wanted.trim().trim_matches('/');
    skills
        .iter()
        .find(|s| s.name == wanted)
        .or_else(|| skills.iter().find(|s| s.dir_name() == wanted))
        .or_else(|| {
            skills
                .iter()
                .find(|s| s.dir.ends_with(wanted) && wanted.contains('/'))
        })
}

#[cfg(test)]
mod tests;
