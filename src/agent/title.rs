//! Session titles generated after the first exchange, as Hermes's
//! `agent/title_generator.py` does: one extra model call with the reference's prompt on the
//! first user message and reply (each cut to 500 characters), the answer cleaned the same
//! way (reasoning blocks, quotes and a `Title:` prefix removed, at most 80 characters).
//! The caller runs it in the background after the reply went out, so it never delays one;
//! a failure only costs the title.

use super::message::{ChatMessage, Role};
use super::provider::{ModelClient, ModelRequest, ProviderError};

/// Asks for what Hermes's `_TITLE_PROMPT` asks for (3-7 words, the user's language, the bare
/// title), in our words.
pub const TITLE_PROMPT: &str = "Name the conversation that opens with the exchange below. Give a title of 3 to 7 words that says what it is about, in the language the user writes in. Answer with the title alone: no quotes, no label, no full stop.";

/// Characters of each side of the exchange sent to the model.
const SNIPPET_CHARS: usize = 500;
/// Longest title kept; longer ones are cut to 77 characters plus "...".
const MAX_TITLE_CHARS: usize = 80;
/// Hermes asks for up to 500 tokens (thinking models spend some before the title).
const MAX_TOKENS: u32 = 500;
/// Longest Discord thread name we set, in UTF-16 units (Discord's cap is 100).
const THREAD_NAME_UNITS: usize = 80;

/// Hermes titles "the first exchange" generously: while the history holds at most two
/// user messages.
pub fn is_early_exchange(history: &[ChatMessage]) -> bool {
    history.iter().filter(|m| m.role == Role::User).count() <= 2
}

/// The one request the title costs: the prompt as system text, the exchange as the user turn.
pub fn title_request(user_message: &str, reply: &str) -> ModelRequest {
    let user: String = user_message.chars().take(SNIPPET_CHARS).collect();
    let assistant: String = reply.chars().take(SNIPPET_CHARS).collect();
    ModelRequest {
        system: Some(TITLE_PROMPT.to_owned()),
        messages: vec![ChatMessage::user(format!(
            "User: {user}\n\nAssistant: {assistant}"
        ))],
        tools: Default::default(),
        max_tokens: Some(MAX_TOKENS),
        stream: false,
    }
}

/// Asks the model for a title; `Ok(None)` when it answered nothing usable.
pub async fn generate_title(
    client: &ModelClient,
    user_message: &str,
    reply: &str,
) -> Result<Option<String>, ProviderError> {
    let request = title_request(user_message, reply);
    let answer = client.complete(&request, &mut |_| {}).await?;
    Ok(clean_title(answer.content.as_deref().unwrap_or_default()))
}

/// Cleans a model's answer into a title, as Hermes's `generate_title` does.
pub fn clean_title(raw: &str) -> Option<String> {
    let without_reasoning = strip_think_blocks(raw);
    let mut title = without_reasoning
        .trim()
        .trim_matches(|c| c == '"' || c == '\'')
        .to_owned();
    if title
        .get(..6)
        .is_some_and(|p| p.eq_ignore_ascii_case("title:"))
    {
        title = title[6..].trim().to_owned();
    }
    if title.chars().count() > MAX_TITLE_CHARS {
        title = format!(
            "{}...",
            title.chars().take(MAX_TITLE_CHARS - 3).collect::<String>()
        );
    }
    (!title.is_empty()).then_some(title)
}

/// The thread name for a session title (Hermes `_sanitize_discord_thread_title`):
/// whitespace collapsed, "Hermes Chat" when empty, over 80 UTF-16 units cut to 77 plus "...".
pub fn thread_name(title: &str) -> String {
    let cleaned = title.split_whitespace().collect::<Vec<_>>().join(" ");
    if cleaned.is_empty() {
        return "Hermes Chat".to_owned();
    }
    if cleaned.encode_utf16().count() <= THREAD_NAME_UNITS {
        return cleaned;
    }
    let mut prefix = String::new();
    let mut units = 0;
    for c in cleaned.chars() {
        units += c.len_utf16();
        if units > THREAD_NAME_UNITS - 3 {
            break;
        }
        prefix.push(c);
    }
    format!("{}...", prefix.trim_end())
}

/// Removes reasoning blocks (`<think>`, `<thinking>`, `<reasoning>`, any case): closed
/// pairs, an unterminated opening tag (to the end) and text before an orphan closing tag.
fn strip_think_blocks(text: &str) -> String {
    const TAGS: [&str; 3] = ["think", "thinking", "reasoning"];
    let mut out = text.to_owned();
    for tag in TAGS {
        let open = format!("<{tag}>");
        let close = format!("</{tag}>");
        loop {
            let lower = out.to_ascii_lowercase();
            match (lower.find(&open), lower.find(&close)) {
                (Some(start), Some(end)) if end > start => {
                    out.replace_range(start..end + close.len(), "");
                }
                (_, Some(end)) => out.replace_range(..end + close.len(), ""),
                (Some(start), None) => out.truncate(start),
                (None, None) => break,
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_prefix_and_reasoning_are_removed() {
        assert_eq!(
            clean_title("\"Rust Borrow Checker Help\"").as_deref(),
            Some("Rust Borrow Checker Help")
        );
        assert_eq!(
            clean_title("'Title: Planning a Trip'").as_deref(),
            Some("Planning a Trip")
        );
        assert_eq!(
            clean_title("TITLE:   Soup Recipes").as_deref(),
            Some("Soup Recipes")
        );
        assert_eq!(
            clean_title("<think>the user asks about tea</think>\nGreen Tea Brewing").as_deref(),
            Some("Green Tea Brewing")
        );
        assert_eq!(
            clean_title("<THINKING>hmm</THINKING> Tax Forms").as_deref(),
            Some("Tax Forms")
        );
        assert_eq!(
            clean_title("reasoning leaked</think>Garden Layout").as_deref(),
            Some("Garden Layout")
        );
        assert_eq!(
            clean_title("Chess Openings<think>never closed"),
            Some("Chess Openings".into())
        );
    }

    #[test]
    fn empty_answers_give_no_title() {
        assert_eq!(clean_title(""), None);
        assert_eq!(clean_title("  \"\"  "), None);
        assert_eq!(clean_title("<think>only thoughts</think>"), None);
        assert_eq!(clean_title("Title:"), None);
    }

    #[test]
    fn long_titles_are_cut_to_80_characters() {
        let long = "é".repeat(120);
        let title = clean_title(&long).unwrap();
        assert_eq!(title.chars().count(), 80);
        assert!(title.ends_with("..."));
        assert_eq!(title, format!("{}...", "é".repeat(77)));
        let exact = "a".repeat(80);
        assert_eq!(clean_title(&exact), Some(exact));
    }

    #[test]
    fn the_request_carries_the_reference_prompt_and_snippets() {
        let request = title_request(&"u".repeat(700), "short reply");
        assert_eq!(request.system.as_deref(), Some(TITLE_PROMPT));
        assert_eq!(request.messages.len(), 1);
        let text = request.messages[0].content.clone().unwrap();
        assert_eq!(
            text,
            format!("User: {}\n\nAssistant: short reply", "u".repeat(500))
        );
        assert!(request.tools.is_empty());
        assert!(!request.stream);
        assert_eq!(request.max_tokens, Some(500));
    }

    #[test]
    fn only_the_first_two_exchanges_are_titled() {
        let mut history = vec![ChatMessage::user("a"), ChatMessage::assistant("b")];
        assert!(is_early_exchange(&history));
        history.push(ChatMessage::user("c"));
        assert!(is_early_exchange(&history));
        history.push(ChatMessage::user("d"));
        assert!(!is_early_exchange(&history));
    }

    #[test]
    fn thread_names_fit_discord_in_utf16_units() {
        assert_eq!(thread_name("  Trip \n to   Rome "), "Trip to Rome");
        assert_eq!(thread_name("   "), "Hermes Chat");
        let emoji = "😀".repeat(50); // 100 UTF-16 units
        let name = thread_name(&emoji);
        assert_eq!(name, format!("{}...", "😀".repeat(38)));
        assert!(name.encode_utf16().count() <= 80);
        let fits = "x".repeat(80);
        assert_eq!(thread_name(&fits), fits);
    }
}
