//! Approvals without buttons: Signal has no inline buttons, so a prompt lists its choices
//! as numbered emoji and a reaction with one of them on the prompt answers it, as a click
//! would (the command event carries the choice's data). Prompts are remembered in memory,
//! the most recent ones only: a reaction to a prompt sent before a restart is not a choice.

use std::collections::VecDeque;
use std::sync::Mutex;

use hermes_adapter::Button;

/// The choice emoji, in order (keycap digits).
pub const CHOICES: [&str; 9] = [
    "1\u{fe0f}\u{20e3}",
    "2\u{fe0f}\u{20e3}",
    "3\u{fe0f}\u{20e3}",
    "4\u{fe0f}\u{20e3}",
    "5\u{fe0f}\u{20e3}",
    "6\u{fe0f}\u{20e3}",
    "7\u{fe0f}\u{20e3}",
    "8\u{fe0f}\u{20e3}",
    "9\u{fe0f}\u{20e3}",
];
const REMEMBERED: usize = 256;

/// The prompt's text with its choices appended.
pub fn with_choices(text: &str, buttons: &[Button]) -> String {
    if buttons.is_empty() {
        return text.to_owned();
    }
    let choices: Vec<String> = buttons
        .iter()
        .zip(CHOICES)
        .map(|(button, emoji)| format!("{emoji} {}", button.label))
        .collect();
    format!("{text}\n\nReact to answer: {}", choices.join(" · "))
}

/// One remembered prompt: the chat, its Signal timestamp, and its buttons.
#[derive(Debug, Default)]
pub struct Prompts {
    sent: Mutex<VecDeque<(String, i64, Vec<Button>)>>,
}

impl Prompts {
    pub fn remember(&self, chat_id: &str, timestamp: i64, buttons: Vec<Button>) {
        let mut sent = self.sent.lock().unwrap_or_else(|p| p.into_inner());
        sent.push_back((chat_id.to_owned(), timestamp, buttons));
        while sent.len() > REMEMBERED {
            sent.pop_front();
        }
    }

    /// The data of the choice `emoji` names on the prompt sent at `timestamp` in `chat_id`.
    pub fn choice(&self, chat_id: &str, timestamp: i64, emoji: &str) -> Option<String> {
        let index = CHOICES.iter().position(|c| {
            // Some clients drop the variation selector.
            *c == emoji || c.replace('\u{fe0f}', "") == emoji
        })?;
        let sent = self.sent.lock().unwrap_or_else(|p| p.into_inner());
        let (_, _, buttons) = sent
            .iter()
            .find(|(chat, ts, _)| chat == chat_id && *ts == timestamp)?;
        buttons.get(index).map(|b| b.data.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buttons() -> Vec<Button> {
        ["Allow", "Deny"]
            .iter()
            .map(|l| Button {
                label: (*l).into(),
                data: format!("/{}", l.to_lowercase()),
            })
            .collect()
    }

    #[test]
    fn a_numbered_reaction_picks_its_choice_in_its_own_chat_only() {
        let prompts = Prompts::default();
        prompts.remember("+1", 100, buttons());
        assert_eq!(
            prompts.choice("+1", 100, CHOICES[1]).as_deref(),
            Some("/deny")
        );
        assert_eq!(
            prompts.choice("+1", 100, "2\u{20e3}").as_deref(),
            Some("/deny")
        );
        assert_eq!(prompts.choice("+2", 100, CHOICES[0]), None);
        assert_eq!(prompts.choice("+1", 101, CHOICES[0]), None);
        assert_eq!(prompts.choice("+1", 100, CHOICES[2]), None);
        assert_eq!(prompts.choice("+1", 100, "👍"), None);
        assert!(
            with_choices("Run it?", &buttons())
                .ends_with("1\u{fe0f}\u{20e3} Allow · 2\u{fe0f}\u{20e3} Deny")
        );
    }
}
