//! The skills index for the system prompt: every enabled skill's name and one line under its
//! category, in a stable order, so the prompt is identical for identical homes (prompt
//! caching) and the agent knows which skill to load with `skill_view`.

use std::collections::BTreeMap;
use std::path::Path;

use super::{Skill, frontmatter};

const PREAMBLE: &str = "## Skills\n\
The skills below are instructions kept in this Hermes home for particular kinds of work. \
Before you answer, check the list: when a skill fits the request, even partly, load it \
with skill_view(name) first and follow what it says, since it records how this user wants \
that work done. skills_list shows every skill with its category. When a skill turns out \
wrong or incomplete, correct it with skill_manage(action='patch'); after a long piece of \
work that is likely to come back, offer to save the method as a new skill.";

const CLOSING: &str = "Go ahead without a skill only when none of them fits.";

/// The index block, or `None` when there are no skills.
pub fn render(skills: &[Skill], skill_roots: &[std::path::PathBuf]) -> Option<String> {
    if skills.is_empty() {
        return None;
    }
    let mut by_category: BTreeMap<&str, Vec<&Skill>> = BTreeMap::new();
    for skill in skills {
        by_category.entry(&skill.category).or_default().push(skill);
    }
    let descriptions = category_descriptions(skill_roots);
    let mut lines = Vec::new();
    for (category, mut members) in by_category {
        members.sort_by(|a, b| a.name.cmp(&b.name));
        members.dedup_by(|a, b| a.name == b.name);
        match descriptions.get(category) {
            Some(text) => lines.push(format!("  {category}: {text}")),
            None => lines.push(format!("  {category}:")),
        }
        for skill in members {
            let short = skill.short_description();
            if short.is_empty() {
                lines.push(format!("    - {}", skill.name));
            } else {
                lines.push(format!("    - {}: {short}", skill.name));
            }
        }
    }
    Some(format!(
        "{PREAMBLE}\n\n<available_skills>\n{}\n</available_skills>\n\n{CLOSING}",
        lines.join("\n")
    ))
}

/// `DESCRIPTION.md` files give a category its line (the first directory's wins).
fn category_descriptions(roots: &[std::path::PathBuf]) -> BTreeMap<String, String> {
    let mut found = BTreeMap::new();
    for root in roots {
        collect(root, root, 0, &mut found);
    }
    found
}

fn collect(root: &Path, dir: &Path, depth: usize, found: &mut BTreeMap<String, String>) {
    if depth > 4 || dir.join("SKILL.md").is_file() {
        return;
    }
    if let Ok(text) = std::fs::read_to_string(dir.join("DESCRIPTION.md")) {
        let (map, _) = frontmatter::split(&text);
        if let (Some(desc), Ok(rel)) = (
            frontmatter::text(&map, "description"),
            dir.strip_prefix(root),
        ) {
            let key = rel.to_string_lossy().into_owned();
            let key = if key.is_empty() {
                "general".to_owned()
            } else {
                key
            };
            found.entry(key).or_insert(desc);
        }
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut dirs: Vec<_> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for child in dirs {
        collect(root, &child, depth + 1, found);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_index_groups_by_category_in_a_stable_order() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        for (rel, text) in [
            (
                "ops/zeta/SKILL.md",
                "---\nname: zeta\ndescription: Last one\n---\n",
            ),
            (
                "ops/alpha/SKILL.md",
                "---\nname: alpha\ndescription: First one\n---\n",
            ),
            (
                "ops/DESCRIPTION.md",
                "---\ndescription: Running servers\n---\n",
            ),
            ("notes/SKILL.md", "---\nname: notes\n---\n"),
        ] {
            let path = root.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let skills = super::super::discover(std::slice::from_ref(&root));
        let text = render(&skills, std::slice::from_ref(&root)).unwrap();
        let block = text
            .split("<available_skills>\n")
            .nth(1)
            .unwrap()
            .split("\n</available_skills>")
            .next()
            .unwrap();
        assert_eq!(
            block,
            "  notes:\n    - notes\n  ops: Running servers\n    - alpha: First one\n    - zeta: Last one"
        );
        assert_eq!(render(&[], &[]), None);
    }
}
