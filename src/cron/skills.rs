//! A job's skills as context for its run: each listed skill's instructions go ahead of the
//! job's prompt, as `/skill` does in chat; a skill that cannot be found is named in a note
//! at the top of the run's output, and the run goes on without it.

use std::collections::BTreeMap;

use crate::config::SkillsConfig;
use crate::home::HermesHome;
use crate::skills::{self, Skill};

/// What finding a job's skills reads: the home, the skills settings and the environment the
/// run's agent sees (external skill folders may name variables).
#[derive(Debug, Clone, Copy)]
pub struct SkillSources<'a> {
    pub home: &'a HermesHome,
    pub settings: &'a SkillsConfig,
    pub env: &'a BTreeMap<String, String>,
}

/// The prompt to run and, when some listed skills could not be loaded, the note the run's
/// output starts with.
pub fn prepare_prompt(
    sources: SkillSources<'_>,
    prompt: &str,
    wanted: &[String],
) -> (String, Option<String>) {
    if wanted.is_empty() {
        return (prompt.to_owned(), None);
    }
    let available = skills::enabled(sources.home, sources.settings, sources.env, Some("cron"));
    compose(&available, prompt, wanted)
}

fn compose(available: &[Skill], prompt: &str, wanted: &[String]) -> (String, Option<String>) {
    let mut parts = Vec::new();
    let mut missing = Vec::new();
    for name in wanted {
        let name = name.trim().trim_start_matches('/');
        let loaded = skills::find(available, name).and_then(|skill| {
            std::fs::read_to_string(skill.skill_md())
                .ok()
                .map(|body| (skill, body))
        });
        match loaded {
            Some((skill, body)) => parts.push(format!(
                "[This scheduled job uses the \"{}\" skill; its instructions follow. Its files are under {}.]\n\n{}",
                skill.name,
                skill.dir.display(),
                body.trim()
            )),
            None => missing.push(name.to_owned()),
        }
    }
    let note = (!missing.is_empty()).then(|| {
        format!(
            "Note: the skill(s) {} listed for this job were not found, so it ran without them.",
            missing.join(", ")
        )
    });
    if parts.is_empty() {
        return (prompt.to_owned(), note);
    }
    if let Some(note) = &note {
        parts.insert(0, format!("[{note}]"));
    }
    parts.push(format!("[The job's own instruction:]\n\n{prompt}"));
    (parts.join("\n\n"), note)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skill(dir: &std::path::Path, name: &str, body: &str) -> Skill {
        let path = dir.join(name);
        std::fs::create_dir_all(&path).unwrap();
        std::fs::write(
            path.join("SKILL.md"),
            format!("---\nname: {name}\ndescription: d\n---\n{body}\n"),
        )
        .unwrap();
        skills::discover(&[dir.to_path_buf()])
            .into_iter()
            .find(|s| s.name == name)
            .unwrap()
    }

    #[test]
    fn found_skills_lead_the_prompt_and_missing_ones_are_noted() {
        let dir = tempfile::tempdir().unwrap();
        let arxiv = skill(dir.path(), "arxiv", "Search arXiv for the newest papers.");
        let (prompt, note) = compose(&[arxiv], "summarise", &["arxiv".into(), "news".into()]);
        assert!(
            prompt.contains("Search arXiv for the newest papers."),
            "{prompt}"
        );
        assert!(prompt.ends_with("summarise"), "{prompt}");
        assert!(note.as_deref().unwrap().contains("news"));
        assert!(!note.unwrap().contains("arxiv"));
    }

    #[test]
    fn no_skills_leaves_the_prompt_alone() {
        assert_eq!(compose(&[], "go", &[]), ("go".to_owned(), None));
        let (prompt, note) = compose(&[], "go", &["gone".into()]);
        assert_eq!(prompt, "go");
        assert!(note.unwrap().contains("gone"));
    }
}
