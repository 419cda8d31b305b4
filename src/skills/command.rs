//! Skills as chat commands: each enabled skill is `/slug` (its name lowercased, spaces and
//! `_` as `-`, other characters dropped, as Hermes derives it), listed by `/commands` and in
//! the platforms' command menus. Invoking one runs a turn whose user message carries the
//! skill's instructions and what the user typed after the command.

use super::{SUPPORT_DIRS, Skill};

/// Telegram and Discord both accept at most 100 menu commands of at most 32 characters.
pub const MENU_LIMIT: usize = 100;
const MENU_NAME_CHARS: usize = 32;

/// The command name for a skill (`None` when nothing usable remains).
pub fn slug(name: &str) -> Option<String> {
    let mut out = String::new();
    for c in name.to_lowercase().chars() {
        let c = if c == ' ' || c == '_' { '-' } else { c };
        if (c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !(c == '-' && out.ends_with('-'))
        {
            out.push(c);
        }
    }
    let out = out.trim_matches('-').to_owned();
    (!out.is_empty()).then_some(out)
}

/// The skill a command names: `command` as typed (Telegram's menu turns `-` into `_`).
pub fn find<'a>(skills: &'a [Skill], command: &str) -> Option<&'a Skill> {
    let wanted = command
        .trim_start_matches('/')
        .replace('_', "-")
        .to_lowercase();
    skills.iter().find(|s| {
        slug(&s.name).is_some_and(|slug| {
            slug == wanted || slug.chars().take(MENU_NAME_CHARS).collect::<String>() == wanted
        })
    })
}

/// Menu entries for `skills`: (command, description), skipping names taken by `reserved`
/// (the gateway's own commands win) and keeping the menu within `MENU_LIMIT` in all.
pub fn menu(skills: &[Skill], reserved: &[&str]) -> Vec<(String, String)> {
    let room = MENU_LIMIT.saturating_sub(reserved.len());
    let mut entries: Vec<(String, String)> = Vec::new();
    for skill in skills {
        let Some(name) = slug(&skill.name) else {
            continue;
        };
        let name: String = name.chars().take(MENU_NAME_CHARS).collect();
        let name = name.trim_end_matches('-').to_owned();
        let taken = reserved.contains(&name.as_str())
            || reserved.contains(&name.replace('-', "_").as_str())
            || entries.iter().any(|(n, _)| *n == name);
        if taken {
            continue;
        }
        let description = if skill.description.is_empty() {
            format!("Run the {} skill", skill.name)
        } else {
            skill.short_description()
        };
        entries.push((name, description));
    }
    if entries.len() > room {
        tracing::warn!(
            skills = entries.len(),
            room,
            "more skills than a command menu holds; the rest still work when typed"
        );
        entries.truncate(room);
    }
    entries
}

/// The user message for `/skill args`: the skill's instructions, where its files are, and
/// the user's own words. `template_vars` is `Some(session id)` when `skills.template_vars`
/// is on.
pub fn invocation(
    skill: &Skill,
    user_text: &str,
    template_vars: Option<Option<&str>>,
) -> std::io::Result<String> {
    let mut content = std::fs::read_to_string(skill.skill_md())?;
    if let Some(session) = template_vars {
        content = super::template::substitute(&content, &skill.dir, session);
    }
    let mut parts = vec![
        format!(
            "[The user ran the /{} command: follow the \"{}\" skill below for this request.]",
            slug(&skill.name).unwrap_or_default(),
            skill.name
        ),
        String::new(),
        content.trim().to_owned(),
        String::new(),
        format!(
            "[The skill's directory is {}; paths in it such as scripts/ or templates/ are relative to it.]",
            skill.dir.display()
        ),
    ];
    let mut files = Vec::new();
    for sub in SUPPORT_DIRS {
        if let Ok(entries) = std::fs::read_dir(skill.dir.join(sub)) {
            for entry in entries.flatten() {
                if entry.path().is_file() {
                    files.push(format!("{sub}/{}", entry.file_name().to_string_lossy()));
                }
            }
        }
    }
    files.sort();
    if !files.is_empty() {
        parts.push(format!(
            "[Files that come with it (read one with skill_view(name=\"{}\", file_path=...)): {}]",
            skill.name,
            files.join(", ")
        ));
    }
    let user_text = user_text.trim();
    if !user_text.is_empty() {
        parts.push(String::new());
        parts.push(format!("What the user asked with it: {user_text}"));
    }
    Ok(parts.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn skill(name: &str) -> Skill {
        Skill {
            name: name.into(),
            dir: PathBuf::from("/s").join(name),
            category: "c".into(),
            description: format!("About {name}"),
            frontmatter: Default::default(),
        }
    }

    #[test]
    fn slugs_follow_hermes_and_telegram_spellings_find_the_skill() {
        assert_eq!(slug("Git Helper").as_deref(), Some("git-helper"));
        assert_eq!(slug("tide_tables").as_deref(), Some("tide-tables"));
        assert_eq!(slug("--Ünï--x!").as_deref(), Some("n-x"));
        assert_eq!(slug("!!"), None);
        let skills = [skill("tide-tables"), skill("knots")];
        assert_eq!(find(&skills, "tide_tables").unwrap().name, "tide-tables");
        assert_eq!(find(&skills, "knots").unwrap().name, "knots");
        assert!(find(&skills, "anchors").is_none());
    }

    #[test]
    fn the_menu_skips_reserved_names_and_stays_within_the_limit() {
        let mut skills = vec![skill("status"), skill("knots")];
        skills.extend((0..120).map(|i| skill(&format!("s{i}"))));
        let menu = menu(&skills, &["new", "status"]);
        assert_eq!(menu.len(), MENU_LIMIT - 2);
        assert_eq!(menu[0], ("knots".to_owned(), "About knots".to_owned()));
        assert!(!menu.iter().any(|(n, _)| n == "status"));
    }
}
