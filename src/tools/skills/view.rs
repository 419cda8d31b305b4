//! `skills_list` and `skill_view`: the JSON shapes of Hermes's tools (`success`, `skills`,
//! `categories`, `count`; `name`, `description`, `content`, `path`, `linked_files`, ...).

use std::path::Path;

use serde_json::{Value, json};

use super::{fail, visible};
use crate::skills::{SUPPORT_DIRS, Skill, find, frontmatter};
use crate::tools::context::ToolCtx;

/// The largest linked file `skill_view` returns whole.
const MAX_LINKED_FILE_BYTES: u64 = 1_048_576;

pub fn list(ctx: &ToolCtx, category: Option<&str>) -> String {
    let mut skills = visible(ctx);
    if let Some(category) = category.filter(|c| !c.is_empty()) {
        skills.retain(|s| s.category == category);
    }
    skills.sort_by(|a, b| (&a.category, &a.name).cmp(&(&b.category, &b.name)));
    let mut categories: Vec<&str> = skills.iter().map(|s| s.category.as_str()).collect();
    categories.dedup();
    let rows: Vec<Value> = skills
        .iter()
        .map(|s| json!({"name": s.name, "description": s.description, "category": s.category}))
        .collect();
    let mut out = json!({
        "success": true,
        "skills": rows,
        "categories": categories,
        "count": skills.len(),
    });
    if skills.is_empty() {
        out["message"] = json!(format!(
            "No skills yet. They live in {}/skills/<name>/SKILL.md.",
            ctx.home.path().display()
        ));
    } else {
        out["hint"] = json!("skill_view(name) loads a skill's instructions and linked files.");
    }
    out.to_string()
}

pub fn view(ctx: &ToolCtx, name: &str, file_path: Option<&str>) -> String {
    if name.trim().is_empty() || name.contains("..") || Path::new(name).is_absolute() {
        return fail(format!("'{name}' is not a skill name; see skills_list."));
    }
    let skills = visible(ctx);
    let Some(skill) = find(&skills, name) else {
        let names: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
        return fail(format!(
            "No skill named '{name}'. Available: {}.",
            if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(", ")
            }
        ));
    };
    match file_path.map(str::trim).filter(|p| !p.is_empty()) {
        Some(path) => linked_file(skill, path),
        None => main_file(ctx, skill),
    }
}

fn main_file(ctx: &ToolCtx, skill: &Skill) -> String {
    let mut content = match std::fs::read_to_string(skill.skill_md()) {
        Ok(content) => content,
        Err(e) => return fail(format!("cannot read {}: {e}", skill.skill_md().display())),
    };
    if ctx.skills.template_vars {
        let session = Some(ctx.session_id.as_str());
        content = crate::skills::template::substitute(&content, &skill.dir, session);
    }
    let linked = linked_files(&skill.dir);
    let required = required_env(&skill.frontmatter);
    let missing: Vec<&String> = required
        .iter()
        .filter(|name| ctx.env.get(*name).is_none_or(|v| v.is_empty()))
        .collect();
    let relative = skill
        .skill_md()
        .strip_prefix(ctx.home.path().join("skills"))
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| skill.skill_md().display().to_string());
    let mut out = json!({
        "success": true,
        "name": skill.name,
        "description": skill.description,
        "tags": frontmatter::strings(skill.frontmatter.get("tags")),
        "content": content,
        "path": relative,
        "skill_dir": skill.dir.display().to_string(),
        "linked_files": if linked.is_empty() { Value::Null } else { json!(linked) },
        "required_environment_variables": required,
        "missing_required_environment_variables": missing,
        "setup_needed": !missing.is_empty(),
    });
    if !linked.is_empty() {
        out["usage_hint"] =
            json!("Read a linked file with skill_view(name, file_path='references/...').");
    }
    out.to_string()
}

/// Files under the skill's support directories, relative to the skill.
fn linked_files(dir: &Path) -> Vec<String> {
    let mut files = Vec::new();
    for sub in SUPPORT_DIRS {
        collect(dir, &dir.join(sub), 0, &mut files);
    }
    files.sort();
    files
}

fn collect(base: &Path, dir: &Path, depth: usize, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() && depth < 4 {
            collect(base, &path, depth + 1, out);
        } else if path.is_file()
            && let Ok(rel) = path.strip_prefix(base)
        {
            out.push(rel.display().to_string());
        }
    }
}

fn linked_file(skill: &Skill, path: &str) -> String {
    let target = skill.dir.join(path);
    let contained = target
        .canonicalize()
        .ok()
        .zip(skill.dir.canonicalize().ok())
        .is_some_and(|(t, d)| t.starts_with(d));
    if path.contains("..") || Path::new(path).is_absolute() || !contained {
        return fail(format!("'{path}' is not a file of skill '{}'.", skill.name));
    }
    match std::fs::metadata(&target) {
        Ok(meta) if meta.len() > MAX_LINKED_FILE_BYTES => {
            return fail(format!(
                "{path} is {} bytes, over the 1 MiB a view may return.",
                meta.len()
            ));
        }
        Err(_) => return fail(format!("'{path}' is not a file of skill '{}'.", skill.name)),
        Ok(_) => {}
    }
    match std::fs::read(&target) {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(text) => json!({"success": true, "name": skill.name, "file": path, "content": text})
                .to_string(),
            Err(e) => json!({
                "success": true, "name": skill.name, "file": path, "is_binary": true,
                "size": e.as_bytes().len(),
                "content": format!("[binary file, {} bytes]", e.as_bytes().len()),
            })
            .to_string(),
        },
        Err(e) => fail(format!("cannot read {path}: {e}")),
    }
}

/// `required_environment_variables` (names or `{name: ...}` entries) and the older
/// `prerequisites.env_vars`.
fn required_env(frontmatter: &serde_json::Map<String, Value>) -> Vec<String> {
    let mut names = Vec::new();
    let entries = match frontmatter.get("required_environment_variables") {
        Some(Value::Array(items)) => items.clone(),
        Some(single @ Value::Object(_)) => vec![single.clone()],
        Some(Value::String(s)) => vec![json!(s)],
        _ => Vec::new(),
    };
    for entry in entries {
        let name = match &entry {
            Value::String(s) => Some(s.clone()),
            Value::Object(map) => map
                .get("name")
                .or_else(|| map.get("env_var"))
                .and_then(Value::as_str)
                .map(str::to_owned),
            _ => None,
        };
        if let Some(name) = name.map(|n| n.trim().to_owned()).filter(|n| !n.is_empty()) {
            names.push(name);
        }
    }
    if let Some(Value::Object(pre)) = frontmatter.get("prerequisites") {
        names.extend(frontmatter::strings(pre.get("env_vars")));
    }
    names.dedup();
    names
}
