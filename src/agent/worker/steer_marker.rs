//! The marker around messages the user sent mid-turn (`/steer`), added to the next tool
//! result so the model reads them as the user's words, not the tool's.

use super::SteerInbox;

const STEER_MARKER_OPEN: &str =
    "[USER MESSAGE SENT DURING THIS TURN — from the user, not from the tool]";
const STEER_MARKER_CLOSE: &str = "[/USER MESSAGE SENT DURING THIS TURN]";

/// Appends pending steer texts to a tool result with Hermes's marker.
pub(super) fn append_steer(result: &mut String, inbox: Option<&SteerInbox>) {
    let Some(inbox) = inbox else { return };
    let texts: Vec<String> = std::mem::take(&mut *inbox.lock().unwrap_or_else(|e| e.into_inner()));
    if texts.is_empty() {
        return;
    }
    let text = texts.join("\n");
    result.push_str(&format!(
        "\n\n{STEER_MARKER_OPEN}\n{text}\n{STEER_MARKER_CLOSE}"
    ));
}
