//! `skills.template_vars`: the two placeholders Hermes fills in a loaded SKILL.md —
//! `${HERMES_SKILL_DIR}` (the skill's directory) and `${HERMES_SESSION_ID}` — so a skill can
//! name its own scripts by absolute path. A placeholder with no value (no session yet) is
//! left as written, so the author can see it did not resolve.

use std::path::Path;

const SKILL_DIR: &str = "${HERMES_SKILL_DIR}";
const SESSION_ID: &str = "${HERMES_SESSION_ID}";

pub fn substitute(content: &str, skill_dir: &Path, session_id: Option<&str>) -> String {
    let mut out = content.replace(SKILL_DIR, &skill_dir.display().to_string());
    if let Some(id) = session_id.filter(|id| !id.is_empty()) {
        out = out.replace(SESSION_ID, id);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_placeholders_are_filled_and_unresolved_ones_stay() {
        let text = "run ${HERMES_SKILL_DIR}/scripts/go.sh for ${HERMES_SESSION_ID} ${HOME}";
        assert_eq!(
            substitute(text, Path::new("/h/skills/x"), Some("s1")),
            "run /h/skills/x/scripts/go.sh for s1 ${HOME}"
        );
        assert_eq!(
            substitute(text, Path::new("/d"), None),
            "run /d/scripts/go.sh for ${HERMES_SESSION_ID} ${HOME}"
        );
    }
}
