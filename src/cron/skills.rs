//! A job's skills as context for its run. hermesd has no skills yet, so this only builds the
//! note that says they were not loaded; when skills land, this one function loads them.

/// The prompt to run and, when the job lists skills that could not be loaded, the note the
/// run's output starts with.
pub fn prepare_prompt(prompt: &str, skills: &[String]) -> (String, Option<String>) {
    if skills.is_empty() {
        return (prompt.to_owned(), None);
    }
    let note = format!(
        "Note: this job lists the skill(s) {}, but hermesd cannot load skills yet, so it ran without them.",
        skills.join(", ")
    );
    (prompt.to_owned(), Some(note))
}

#[cfg(test)]
mod tests {
    #[test]
    fn listed_skills_yield_a_note_naming_them() {
        let (prompt, note) = super::prepare_prompt("go", &["arxiv".into(), "news".into()]);
        assert_eq!(prompt, "go");
        assert!(note.unwrap().contains("arxiv, news"));
        assert!(super::prepare_prompt("go", &[]).1.is_none());
    }
}
