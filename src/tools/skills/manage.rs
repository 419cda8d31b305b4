//! `skill_manage`: the agent writes skills into `$HERMES_HOME/skills` with Hermes's checks —
//! names and categories are single safe path segments, SKILL.md needs YAML frontmatter with
//! `name` and `description` and a body, sizes are capped, supporting files stay inside the
//! skill's `references/`, `templates/`, `scripts/` or `assets/`, and only skills in the home
//! (never an external directory) can change. Writes are atomic (temp file + rename).

use std::path::{Component, Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Value, json};

use super::edit_error::{SkillEditError, io_error};
use super::fail;
use super::limits::{
    MAX_DESCRIPTION_CHARS, MAX_NAME_CHARS, MAX_SKILL_CHARS, MAX_SUPPORT_FILE_BYTES,
};
use crate::skills::{SUPPORT_DIRS, Skill, discover, find, frontmatter};
use crate::tools::approval::write_atomically;
use crate::tools::context::ToolCtx;
use crate::tools::error::ToolError;
use crate::tools::registry::{ToolEntry, handler};

static VALID_NAME: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[a-z0-9][a-z0-9._-]*$").expect("name pattern"));

pub fn entry() -> ToolEntry {
    ToolEntry::new(
        "skill_manage",
        "skills",
        json!({
            "description": "Create or change skills in this Hermes home. create: a new skill from full SKILL.md text (YAML frontmatter with name and description, then instructions). edit: replace a skill's SKILL.md. patch: replace old_string with new_string in SKILL.md or in file_path. delete: remove a skill. write_file / remove_file: a supporting file under references/, templates/, scripts/ or assets/.",
            "parameters": {
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": ["create", "patch", "edit", "delete", "write_file", "remove_file"]},
                    "name": {"type": "string", "description": "Skill name: lowercase letters, digits, '.', '_', '-'; at most 64 characters"},
                    "content": {"type": "string", "description": "Full SKILL.md text (create, edit)"},
                    "old_string": {"type": "string", "description": "Exact text to replace (patch)"},
                    "new_string": {"type": "string", "description": "Replacement text (patch)"},
                    "replace_all": {"type": "boolean", "description": "Replace every occurrence instead of requiring exactly one (patch)"},
                    "category": {"type": "string", "description": "Optional directory to file a new skill under (create)"},
                    "file_path": {"type": "string", "description": "A supporting file, e.g. 'references/notes.md' (patch, write_file, remove_file)"},
                    "file_content": {"type": "string", "description": "The supporting file's text (write_file)"}
                },
                "required": ["action", "name"]
            }
        }),
        handler(|ctx: ToolCtx, args: Value| async move {
            Ok::<_, ToolError>(run(&ctx, &args))
        }),
    )
    .with_emoji("📝")
}

fn run(ctx: &ToolCtx, args: &Value) -> String {
    let text = |key: &str| args[key].as_str();
    let name = text("name").unwrap_or_default().trim();
    let outcome = match text("action").unwrap_or_default() {
        "create" => create(
            ctx,
            name,
            text("content").unwrap_or_default(),
            text("category"),
        ),
        "edit" => edit(ctx, name, text("content").unwrap_or_default()),
        "patch" => patch(
            ctx,
            name,
            text("old_string").unwrap_or_default(),
            text("new_string").unwrap_or_default(),
            args["replace_all"].as_bool().unwrap_or(false),
            text("file_path"),
        ),
        "delete" => delete(ctx, name),
        "write_file" => write_file(
            ctx,
            name,
            text("file_path").unwrap_or_default(),
            text("file_content").unwrap_or_default(),
        ),
        "remove_file" => remove_file(ctx, name, text("file_path").unwrap_or_default()),
        other => Err(SkillEditError::UnknownAction(other.to_owned())),
    };
    match outcome {
        Ok(result) => result.to_string(),
        Err(error) => fail(error.to_string()),
    }
}

type Outcome = Result<Value, SkillEditError>;

fn skills_root(ctx: &ToolCtx) -> PathBuf {
    ctx.home.path().join("skills")
}

fn check_name(name: &str, what: &'static str) -> Result<(), SkillEditError> {
    if name.is_empty() {
        return Err(SkillEditError::NameMissing { what });
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(SkillEditError::NameTooLong { what });
    }
    if !VALID_NAME.is_match(name) {
        return Err(SkillEditError::NameInvalid {
            name: name.to_owned(),
            what,
        });
    }
    Ok(())
}

/// Checks full SKILL.md text: frontmatter with `name` and `description`, a body, the size cap.
fn check_skill_md(content: &str) -> Result<(), SkillEditError> {
    if content.trim().is_empty() {
        return Err(SkillEditError::SkillMdEmpty);
    }
    let chars = content.chars().count();
    if chars > MAX_SKILL_CHARS {
        return Err(SkillEditError::SkillMdTooLong { chars });
    }
    let trimmed = content.strip_prefix('\u{feff}').unwrap_or(content);
    if !trimmed.starts_with("---") {
        return Err(SkillEditError::NoFrontmatter);
    }
    let (map, body) = frontmatter::split(trimmed);
    if map.is_empty() {
        let closed = trimmed[3..].contains("\n---");
        return Err(if closed {
            SkillEditError::FrontmatterNotAMapping
        } else {
            SkillEditError::FrontmatterUnclosed
        });
    }
    let yaml = trimmed[3..].split("\n---").next().unwrap_or_default();
    if let Err(e) = serde_norway::from_str::<Value>(yaml) {
        return Err(SkillEditError::FrontmatterYaml(e));
    }
    for field in ["name", "description"] {
        if !map.contains_key(field) {
            return Err(SkillEditError::FrontmatterField(field));
        }
    }
    let description = frontmatter::text(&map, "description").unwrap_or_default();
    if description.chars().count() > MAX_DESCRIPTION_CHARS {
        return Err(SkillEditError::DescriptionTooLong);
    }
    if body.trim().is_empty() {
        return Err(SkillEditError::NoInstructions);
    }
    Ok(())
}

/// A skill the agent may change: found in the home's own skills directory.
fn own_skill(ctx: &ToolCtx, name: &str) -> Result<Skill, SkillEditError> {
    check_name(name, "skill name")?;
    let root = skills_root(ctx);
    let skills = discover(std::slice::from_ref(&root));
    if let Some(skill) = find(&skills, name) {
        return Ok(skill.clone());
    }
    let elsewhere = discover(&crate::skills::skill_dirs(&ctx.home, &ctx.skills, &ctx.env));
    if find(&elsewhere, name).is_some() {
        return Err(SkillEditError::External(name.to_owned()));
    }
    Err(SkillEditError::NotFound {
        name: name.to_owned(),
        root,
    })
}

/// Writes `content` to `path` in the skill at `dir`, after the `skills.guard_agent_created`
/// scan when that is on.
fn write(ctx: &ToolCtx, dir: &Path, path: &Path, content: &str) -> Result<(), SkillEditError> {
    if ctx.skills.guard_agent_created {
        super::guard::check(dir, (path, content))?;
    }
    // Skills live in the home: new directories 0700 and files 0600, like all it holds.
    if let Some(parent) = path.parent() {
        crate::home::private::create_dir_all(parent).map_err(io_error("create", parent))?;
    }
    write_atomically(
        path,
        content.as_bytes(),
        Some(crate::home::private::FILE_MODE),
    )
    .map_err(io_error("write", path))
}

fn create(ctx: &ToolCtx, name: &str, content: &str, category: Option<&str>) -> Outcome {
    check_name(name, "skill name")?;
    let category = category.map(str::trim).filter(|c| !c.is_empty());
    if let Some(category) = category {
        check_name(category, "category")?;
    }
    check_skill_md(content)?;
    let all = discover(&crate::skills::skill_dirs(&ctx.home, &ctx.skills, &ctx.env));
    if let Some(existing) = find(&all, name) {
        return Err(SkillEditError::Exists {
            name: name.to_owned(),
            dir: existing.dir.clone(),
        });
    }
    let root = skills_root(ctx);
    let dir = match category {
        Some(category) => root.join(category).join(name),
        None => root.join(name),
    };
    write(ctx, &dir, &dir.join("SKILL.md"), content)?;
    let mut out = json!({
        "success": true,
        "message": format!("Created skill '{name}'."),
        "path": dir.strip_prefix(&root).unwrap_or(&dir).display().to_string(),
        "skill_md": dir.join("SKILL.md").display().to_string(),
    });
    if let Some(category) = category {
        out["category"] = json!(category);
    }
    Ok(out)
}

fn edit(ctx: &ToolCtx, name: &str, content: &str) -> Outcome {
    let skill = own_skill(ctx, name)?;
    check_skill_md(content)?;
    write(ctx, &skill.dir, &skill.skill_md(), content)?;
    Ok(json!({"success": true, "message": format!("Replaced SKILL.md of '{name}'.")}))
}

fn patch(
    ctx: &ToolCtx,
    name: &str,
    old: &str,
    new: &str,
    replace_all: bool,
    file_path: Option<&str>,
) -> Outcome {
    let skill = own_skill(ctx, name)?;
    if old.is_empty() {
        return Err(SkillEditError::NoOldString);
    }
    let file_path = file_path.map(str::trim).filter(|p| !p.is_empty());
    let target = match file_path {
        Some(path) if !is_skill_md(path) => support_target(&skill, path)?,
        _ => skill.skill_md(),
    };
    let current = std::fs::read_to_string(&target).map_err(io_error("read", &target))?;
    let count = current.matches(old).count();
    let updated = match (count, replace_all) {
        (0, _) => {
            return Err(SkillEditError::OldStringAbsent);
        }
        (1, _) | (_, true) => current.replace(old, new),
        (n, false) => {
            return Err(SkillEditError::OldStringRepeated(n));
        }
    };
    if target == skill.skill_md() {
        check_skill_md(&updated)?;
    } else if updated.len() > MAX_SUPPORT_FILE_BYTES {
        return Err(SkillEditError::PatchedFileTooLarge);
    }
    write(ctx, &skill.dir, &target, &updated)?;
    Ok(json!({
        "success": true,
        "message": format!("Patched {} of '{name}' ({} replacement{}).", file_path.unwrap_or("SKILL.md"), if replace_all { count } else { 1 }, if replace_all && count != 1 { "s" } else { "" }),
    }))
}

fn delete(ctx: &ToolCtx, name: &str) -> Outcome {
    let skill = own_skill(ctx, name)?;
    let root = skills_root(ctx);
    let inside = skill
        .dir
        .canonicalize()
        .ok()
        .zip(root.canonicalize().ok())
        .is_some_and(|(dir, root)| dir != root && dir.starts_with(&root));
    if !inside || std::fs::symlink_metadata(&skill.dir).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(SkillEditError::NotASkillDir(skill.dir.clone()));
    }
    std::fs::remove_dir_all(&skill.dir).map_err(io_error("delete", &skill.dir))?;
    Ok(json!({"success": true, "message": format!("Deleted skill '{name}'.")}))
}

fn is_skill_md(path: &str) -> bool {
    let parts: Vec<Component> = Path::new(path).components().collect();
    Path::new(path).file_name().is_some_and(|n| n == "SKILL.md") && parts.len() <= 2
}

/// A supporting file's path: relative, no `..`, under one of the support directories, and
/// still inside the skill after resolving symlinks.
fn support_target(skill: &Skill, path: &str) -> Result<PathBuf, SkillEditError> {
    let relative = Path::new(path);
    let mut parts = relative.components();
    let first = match parts.next() {
        Some(Component::Normal(first)) => first.to_string_lossy().into_owned(),
        _ => {
            return Err(SkillEditError::NotRelative(path.to_owned()));
        }
    };
    if relative
        .components()
        .any(|c| !matches!(c, Component::Normal(_)))
    {
        return Err(SkillEditError::Climbs);
    }
    if !SUPPORT_DIRS.contains(&first.as_str()) {
        return Err(SkillEditError::OutsideSupportDirs {
            path: path.to_owned(),
        });
    }
    if relative.components().count() < 2 {
        return Err(SkillEditError::NamesADirectory {
            path: path.to_owned(),
            first,
        });
    }
    let target = skill.dir.join(relative);
    // Resolve the deepest existing ancestor: a symlinked directory must not lead outside.
    let existing = target
        .ancestors()
        .find(|p| p.exists())
        .unwrap_or(&skill.dir);
    let escapes = existing
        .canonicalize()
        .ok()
        .zip(skill.dir.canonicalize().ok())
        .is_none_or(|(resolved, dir)| !resolved.starts_with(dir));
    if escapes {
        return Err(SkillEditError::Escapes(path.to_owned()));
    }
    Ok(target)
}

fn write_file(ctx: &ToolCtx, name: &str, path: &str, content: &str) -> Outcome {
    let skill = own_skill(ctx, name)?;
    if is_skill_md(path) {
        return edit(ctx, name, content);
    }
    let target = support_target(&skill, path)?;
    if content.len() > MAX_SUPPORT_FILE_BYTES {
        return Err(SkillEditError::SupportFileTooLarge(content.len()));
    }
    write(ctx, &skill.dir, &target, content)?;
    Ok(
        json!({"success": true, "message": format!("Wrote {path} in '{name}'."), "path": target.display().to_string()}),
    )
}

fn remove_file(ctx: &ToolCtx, name: &str, path: &str) -> Outcome {
    let skill = own_skill(ctx, name)?;
    if is_skill_md(path) {
        return Err(SkillEditError::SkillMdAlone);
    }
    let target = support_target(&skill, path)?;
    if !target.is_file() {
        return Err(SkillEditError::NotAFile {
            path: path.to_owned(),
            name: name.to_owned(),
        });
    }
    std::fs::remove_file(&target).map_err(io_error("remove", Path::new(path)))?;
    Ok(json!({"success": true, "message": format!("Removed {path} from '{name}'.")}))
}

#[cfg(test)]
#[path = "manage_tests.rs"]
mod tests;
