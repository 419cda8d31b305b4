//! `skill_manage`: the agent writes skills into `$HERMES_HOME/skills` with Hermes's checks —
//! names and categories are single safe path segments, SKILL.md needs YAML frontmatter with
//! `name` and `description` and a body, sizes are capped, supporting files stay inside the
//! skill's `references/`, `templates/`, `scripts/` or `assets/`, and only skills in the home
//! (never an external directory) can change. Writes are atomic (temp file + rename).

use std::path::{Component, Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Value, json};

use super::fail;
use crate::skills::{SUPPORT_DIRS, Skill, discover, find, frontmatter};
use crate::tools::approval::write_atomically;
use crate::tools::context::ToolCtx;
use crate::tools::error::ToolError;
use crate::tools::registry::{ToolEntry, handler};

/// Hermes's limits for agent-written skills.
pub const MAX_NAME_CHARS: usize = 64;
pub const MAX_DESCRIPTION_CHARS: usize = 1024;
pub const MAX_SKILL_CHARS: usize = 100_000;
pub const MAX_SUPPORT_FILE_BYTES: usize = 1_048_576;

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
        other => Err(format!(
            "'{other}' is not an action skill_manage knows (see the enum in its schema)."
        )),
    };
    match outcome {
        Ok(result) => result.to_string(),
        Err(message) => fail(message),
    }
}

type Outcome = Result<Value, String>;

fn skills_root(ctx: &ToolCtx) -> PathBuf {
    ctx.home.path().join("skills")
}

fn check_name(name: &str, what: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err(format!("A {what} is required."));
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(format!(
            "The {what} is longer than {MAX_NAME_CHARS} characters."
        ));
    }
    if !VALID_NAME.is_match(name) {
        return Err(format!(
            "'{name}' is not a valid {what}: start with a lowercase letter or digit, then use only lowercase letters, digits, '.', '_' and '-'."
        ));
    }
    Ok(())
}

/// Checks full SKILL.md text: frontmatter with `name` and `description`, a body, the size cap.
fn check_skill_md(content: &str) -> Result<(), String> {
    if content.trim().is_empty() {
        return Err("SKILL.md cannot be empty.".into());
    }
    let chars = content.chars().count();
    if chars > MAX_SKILL_CHARS {
        return Err(format!(
            "SKILL.md would be {chars} characters, over the {MAX_SKILL_CHARS} limit; move detail into references/ files."
        ));
    }
    let trimmed = content.strip_prefix('\u{feff}').unwrap_or(content);
    if !trimmed.starts_with("---") {
        return Err("SKILL.md must open with YAML frontmatter between '---' lines.".into());
    }
    let (map, body) = frontmatter::split(trimmed);
    if map.is_empty() {
        let closed = trimmed[3..].contains("\n---");
        return Err(if closed {
            "The frontmatter is not a YAML mapping of keys to values.".into()
        } else {
            "The frontmatter has no closing '---' line.".into()
        });
    }
    let yaml = trimmed[3..].split("\n---").next().unwrap_or_default();
    if let Err(e) = serde_norway::from_str::<Value>(yaml) {
        return Err(format!("The frontmatter is not valid YAML: {e}"));
    }
    for field in ["name", "description"] {
        if !map.contains_key(field) {
            return Err(format!("The frontmatter needs a '{field}' field."));
        }
    }
    let description = frontmatter::text(&map, "description").unwrap_or_default();
    if description.chars().count() > MAX_DESCRIPTION_CHARS {
        return Err(format!(
            "The description is longer than {MAX_DESCRIPTION_CHARS} characters."
        ));
    }
    if body.trim().is_empty() {
        return Err("SKILL.md needs instructions after the frontmatter.".into());
    }
    Ok(())
}

/// A skill the agent may change: found in the home's own skills directory.
fn own_skill(ctx: &ToolCtx, name: &str) -> Result<Skill, String> {
    check_name(name, "skill name")?;
    let root = skills_root(ctx);
    let skills = discover(std::slice::from_ref(&root));
    if let Some(skill) = find(&skills, name) {
        return Ok(skill.clone());
    }
    let elsewhere = discover(&crate::skills::skill_dirs(&ctx.home, &ctx.skills, &ctx.env));
    if find(&elsewhere, name).is_some() {
        return Err(format!(
            "Skill '{name}' lives in an external skills directory, which is read-only; create a copy in the home instead."
        ));
    }
    Err(format!("No skill named '{name}' in {}.", root.display()))
}

/// Writes `content` to `path` in the skill at `dir`, after the `skills.guard_agent_created`
/// scan when that is on.
fn write(ctx: &ToolCtx, dir: &Path, path: &Path, content: &str) -> Result<(), String> {
    if ctx.skills.guard_agent_created {
        super::guard::check(dir, (path, content))?;
    }
    // Skills live in the home: new directories 0700 and files 0600, like all it holds.
    if let Some(parent) = path.parent() {
        crate::home::private::create_dir_all(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    write_atomically(
        path,
        content.as_bytes(),
        Some(crate::home::private::FILE_MODE),
    )
    .map_err(|e| format!("cannot write {}: {e}", path.display()))
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
        return Err(format!(
            "A skill named '{name}' already exists at {}.",
            existing.dir.display()
        ));
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
        return Err("old_string is required for a patch.".into());
    }
    let file_path = file_path.map(str::trim).filter(|p| !p.is_empty());
    let target = match file_path {
        Some(path) if !is_skill_md(path) => support_target(&skill, path)?,
        _ => skill.skill_md(),
    };
    let current = std::fs::read_to_string(&target)
        .map_err(|e| format!("cannot read {}: {e}", target.display()))?;
    let count = current.matches(old).count();
    let updated = match (count, replace_all) {
        (0, _) => {
            return Err(
                "old_string does not occur in the file; view it and copy the text exactly.".into(),
            );
        }
        (1, _) | (_, true) => current.replace(old, new),
        (n, false) => {
            return Err(format!(
                "old_string occurs {n} times; add surrounding text to make it unique, or set replace_all."
            ));
        }
    };
    if target == skill.skill_md() {
        check_skill_md(&updated)?;
    } else if updated.len() > MAX_SUPPORT_FILE_BYTES {
        return Err(format!(
            "The file would exceed {MAX_SUPPORT_FILE_BYTES} bytes."
        ));
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
        return Err(format!(
            "Refusing to delete {}: it is not a skill directory inside the home.",
            skill.dir.display()
        ));
    }
    std::fs::remove_dir_all(&skill.dir)
        .map_err(|e| format!("cannot delete {}: {e}", skill.dir.display()))?;
    Ok(json!({"success": true, "message": format!("Deleted skill '{name}'.")}))
}

fn is_skill_md(path: &str) -> bool {
    let parts: Vec<Component> = Path::new(path).components().collect();
    Path::new(path).file_name().is_some_and(|n| n == "SKILL.md") && parts.len() <= 2
}

/// A supporting file's path: relative, no `..`, under one of the support directories, and
/// still inside the skill after resolving symlinks.
fn support_target(skill: &Skill, path: &str) -> Result<PathBuf, String> {
    let relative = Path::new(path);
    let mut parts = relative.components();
    let first = match parts.next() {
        Some(Component::Normal(first)) => first.to_string_lossy().into_owned(),
        _ => {
            return Err(format!(
                "'{path}' must be a relative path inside the skill."
            ));
        }
    };
    if relative
        .components()
        .any(|c| !matches!(c, Component::Normal(_)))
    {
        return Err("Paths may not contain '..' or start at the root.".into());
    }
    if !SUPPORT_DIRS.contains(&first.as_str()) {
        return Err(format!(
            "Supporting files go under {}; got '{path}'.",
            SUPPORT_DIRS.join(", ")
        ));
    }
    if relative.components().count() < 2 {
        return Err(format!(
            "'{path}' names a directory; give a file, e.g. '{first}/notes.md'."
        ));
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
        return Err(format!("'{path}' resolves outside the skill's directory."));
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
        return Err(format!(
            "The file is {} bytes, over the {MAX_SUPPORT_FILE_BYTES}-byte limit.",
            content.len()
        ));
    }
    write(ctx, &skill.dir, &target, content)?;
    Ok(
        json!({"success": true, "message": format!("Wrote {path} in '{name}'."), "path": target.display().to_string()}),
    )
}

fn remove_file(ctx: &ToolCtx, name: &str, path: &str) -> Outcome {
    let skill = own_skill(ctx, name)?;
    if is_skill_md(path) {
        return Err("SKILL.md cannot be removed on its own; delete the skill instead.".into());
    }
    let target = support_target(&skill, path)?;
    if !target.is_file() {
        return Err(format!("'{path}' is not a file of '{name}'."));
    }
    std::fs::remove_file(&target).map_err(|e| format!("cannot remove {path}: {e}"))?;
    Ok(json!({"success": true, "message": format!("Removed {path} from '{name}'.")}))
}

#[cfg(test)]
#[path = "manage_tests.rs"]
mod tests;
