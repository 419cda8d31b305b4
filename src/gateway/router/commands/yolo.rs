//! `/yolo`: this session's dangerous commands run without asking, until `/yolo` again or
//! `/new`. Kept in memory (a restart asks again), as Hermes keeps it. Only an allowed user
//! may turn it on: it answers every later approval of the session in advance. The
//! hardline floor, the `sudo -S` guard and `approvals.deny` refuse as before.

use super::{CommandCtx, Reply};
use crate::gateway::router::authority::Gate;

pub(super) fn gate() -> Gate {
    Gate::AllowedUsersOnly("it approves every dangerous command of the session in advance")
}

pub(super) fn apply(ctx: &CommandCtx<'_>) -> Reply {
    let live = ctx.router.live();
    let Ok(deps) = &live.agent else {
        return Reply::Text("No model is configured, so there are no commands to approve.".into());
    };
    let Some(session_id) = ctx.router.sessions.current_session_id(&ctx.slot.key) else {
        return Reply::Text(
            "This chat has no session yet: send a message first, then `/yolo`.".into(),
        );
    };
    let on = !deps.approvals.is_yolo(&session_id);
    deps.approvals.set_yolo(&session_id, on);
    tracing::warn!(session_key = %ctx.slot.key, session_id = %session_id, on, "/yolo toggled");
    Reply::Text(yolo_text(on))
}

fn yolo_text(on: bool) -> String {
    if on {
        "⚠️ YOLO on for this session: dangerous commands run without asking. Hard-blocked \
         commands and `approvals.deny` rules still refuse. `/yolo` again (or `/new`) turns \
         it off."
            .to_owned()
    } else {
        "✅ YOLO off: dangerous commands ask for approval again.".to_owned()
    }
}
