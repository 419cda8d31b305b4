//! How a `/background` task's answer reads in the chat (commands/background.rs starts the
//! task): which task it was, what was asked, and whether it finished.

use hermes_adapter::BackgroundTag;

/// A task's answer as posted to the chat: `finished` when the task's turn completed (its
/// reply), else `text` says why it did not (a provider failure, a timeout).
pub(in crate::gateway::router) fn answer_text(
    tag: &BackgroundTag,
    text: &str,
    finished: bool,
) -> String {
    if finished {
        format!(
            "✅ Background task `{}` is done.\nYou asked: \"{}\"\n\n{text}",
            tag.task_id, tag.preview
        )
    } else {
        format!(
            "❌ Background task `{}` did not finish (\"{}\"):\n{text}",
            tag.task_id, tag.preview
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_say_which_task_and_whether_it_finished() {
        let tag = BackgroundTag {
            task_id: "bg_010203_abcdef".into(),
            preview: "sum it up".into(),
        };
        let done = answer_text(&tag, "42", true);
        assert!(
            done.starts_with("✅ Background task `bg_010203_abcdef` is done."),
            "{done}"
        );
        assert!(done.contains("\"sum it up\""), "{done}");
        assert!(done.ends_with("\n\n42"), "{done}");
        let failed = answer_text(&tag, "⚠️ Sorry, that failed: boom", false);
        assert!(
            failed.starts_with("❌ Background task `bg_010203_abcdef` did not finish"),
            "{failed}"
        );
        assert!(failed.ends_with("boom"), "{failed}");
    }
}
