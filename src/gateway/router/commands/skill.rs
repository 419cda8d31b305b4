//! A platform's skills as slash commands: `/name args` for an enabled skill becomes the
//! event's turn, the skill's instructions followed by the user's words.

use hermes_adapter::MessageEvent;

use crate::gateway::router::Router;

/// The turn text for `/name args` when `name` is one of the platform's skills.
pub(super) fn skill_turn_text(
    router: &Router,
    key: &str,
    event: &MessageEvent,
    name: &str,
    args: &str,
) -> Option<String> {
    let skills = router.platform_skills(&event.source.platform);
    let skill = crate::skills::command::find(&skills, name)?;
    // `${HERMES_SESSION_ID}`: the chat's current session (none before its first turn).
    let session = router
        .routing
        .get(key)
        .map(|entry| entry.session_id.clone());
    let fill = match &router.live().agent {
        Ok(deps) => deps.settings.skills.template_vars,
        Err(_) => true,
    };
    let vars = fill.then_some(session.as_deref());
    match crate::skills::command::invocation(skill, args, vars) {
        Ok(text) => Some(text),
        Err(e) => {
            tracing::warn!(skill = %skill.name, error = %e, "cannot read the skill");
            None
        }
    }
}
