//! Context compression: when a conversation passes a share of the model's context window,
//! the middle is summarised by the model and the conversation continues in a child session
//! holding the protected head, the summary and the protected tail. A tool call and its
//! results are never split.

use super::message::{ChatMessage, Role};

/// Marks a summary message so later compressions (and people) recognise it.
pub const SUMMARY_PREFIX: &str = "[EARLIER TURNS, SUMMARISED] What came before this point was \
condensed into the summary below. It is background, not a request: answer the newest user \
message after it. All your tools are still available.";
const SUMMARY_END: &str = "[SUMMARY ENDS — the newest message follows]";
/// The instruction given to the model that writes the summary.
pub const SUMMARISER_PROMPT: &str = "You compress conversations. Summarise the transcript you \
are given so another assistant can continue the work: the user's goals, decisions made, \
facts learned (paths, commands, values), what was done and what remains. Be specific and \
concise; use short sections. Output only the summary.";
/// Messages kept verbatim at the start (besides the system prompt).
pub const PROTECT_FIRST_N: usize = 3;

/// A rough token count (4 characters a token, plus per-message overhead).
pub fn estimate_tokens(messages: &[ChatMessage]) -> usize {
    messages
        .iter()
        .map(|m| {
            let text = m.content.as_deref().map_or(0, str::len)
                + m.tool_calls
                    .iter()
                    .map(|c| c.name.len() + c.arguments.len())
                    .sum::<usize>();
            text / 4 + 4
        })
        .sum()
}

/// Which messages stay verbatim: `messages[..head_end]` and `messages[tail_start..]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    pub head_end: usize,
    pub tail_start: usize,
}

/// Chooses the middle to summarise, or `None` when there is nothing worth compressing.
pub fn plan(
    messages: &[ChatMessage],
    protect_first_n: usize,
    protect_last_n: usize,
) -> Option<Plan> {
    let n = messages.len();
    let mut head_end = protect_first_n.min(n);
    // The head must end at a clean boundary: never inside a tool round (an assistant's
    // calls and their results belong together, and must be followed by an assistant).
    while head_end > 0 {
        let last = &messages[head_end - 1];
        if last.role == Role::Tool || (last.role == Role::Assistant && !last.tool_calls.is_empty())
        {
            head_end -= 1;
        } else {
            break;
        }
    }
    let mut tail_start = n.saturating_sub(protect_last_n);
    while tail_start > head_end && messages[tail_start].role == Role::Tool {
        tail_start -= 1;
    }
    // Summarising fewer than two messages saves nothing.
    (tail_start >= head_end + 2).then_some(Plan {
        head_end,
        tail_start,
    })
}

/// The middle as plain text for the summariser.
pub fn render_transcript(messages: &[ChatMessage]) -> String {
    let mut out = String::new();
    for m in messages {
        let role = match m.role {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        };
        out.push_str(&format!(
            "[{role}] {}\n",
            m.content.as_deref().unwrap_or("")
        ));
        for call in &m.tool_calls {
            out.push_str(&format!("[tool call] {}({})\n", call.name, call.arguments));
        }
    }
    out
}

/// Builds the compressed history: head, the summary in a role that keeps alternation valid,
/// then the tail. When neither role fits, the summary is merged into the first tail message.
pub fn assemble(messages: &[ChatMessage], plan: Plan, summary: &str) -> Vec<ChatMessage> {
    let head = &messages[..plan.head_end];
    let tail = &messages[plan.tail_start..];
    let body = format!("{SUMMARY_PREFIX}\n{summary}\n\n{SUMMARY_END}");
    let last_head = head.last().map(|m| m.role);
    let first_tail = tail.first().map(|m| m.role);
    let user_survives = head.iter().chain(tail).any(|m| m.role == Role::User);
    let force_user = last_head.is_none() || !user_survives;
    let mut role = if force_user || matches!(last_head, Some(Role::Assistant | Role::Tool)) {
        Role::User
    } else {
        Role::Assistant
    };
    let mut merge = false;
    if Some(role) == first_tail {
        let flipped = if role == Role::User {
            Role::Assistant
        } else {
            Role::User
        };
        if Some(flipped) != last_head && !force_user {
            role = flipped;
        } else {
            merge = true;
        }
    }
    let mut out: Vec<ChatMessage> = head.to_vec();
    if merge {
        let mut first = tail[0].clone();
        let original = first.content.take().unwrap_or_default();
        first.content = Some(format!("{body}\n\n{original}"));
        out.push(first);
        out.extend_from_slice(&tail[1..]);
    } else {
        let mut summary_message = ChatMessage::user(body);
        summary_message.role = role;
        out.push(summary_message);
        out.extend_from_slice(tail);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::message::ToolCall;

    fn convo(turns: usize) -> Vec<ChatMessage> {
        let mut v = Vec::new();
        for i in 0..turns {
            v.push(ChatMessage::user(format!("question {i}")));
            let mut call = ChatMessage::assistant("");
            call.content = None;
            call.tool_calls = vec![
                ToolCall {
                    id: format!("a{i}"),
                    name: "terminal".into(),
                    arguments: "{}".into(),
                },
                ToolCall {
                    id: format!("b{i}"),
                    name: "read_file".into(),
                    arguments: "{}".into(),
                },
            ];
            v.push(call);
            v.push(ChatMessage::tool_result(format!("a{i}"), "terminal", "ok"));
            v.push(ChatMessage::tool_result(format!("b{i}"), "read_file", "ok"));
            v.push(ChatMessage::assistant(format!("answer {i}")));
        }
        v
    }

    #[test]
    fn never_splits_a_tool_call_from_its_results() {
        let messages = convo(10);
        for last_n in 1..30 {
            let Some(chosen) = plan(&messages, 3, last_n) else {
                continue;
            };
            assert_ne!(
                messages[chosen.tail_start].role,
                Role::Tool,
                "last_n {last_n}"
            );
            assert_ne!(
                messages[chosen.head_end].role,
                Role::Tool,
                "last_n {last_n}"
            );
            let mut out = assemble(&messages, chosen, "s");
            out.push(ChatMessage::user("next question"));
            let checked = crate::agent::message::enforce_alternation(out.clone())
                .unwrap_or_else(|e| panic!("last_n {last_n}: {e}"));
            assert_eq!(
                checked, out,
                "last_n {last_n}: the compressed history needed repairs"
            );
        }
    }

    #[test]
    fn keeps_the_last_n_and_summarises_the_middle() {
        let messages = convo(10);
        let chosen = plan(&messages, PROTECT_FIRST_N, 20).unwrap();
        let out = assemble(&messages, chosen, "the summary");
        assert!(out.len() < messages.len());
        assert_eq!(&out[out.len() - 20..], &messages[messages.len() - 20..]);
        let summary = out.iter().find(|m| {
            m.content
                .as_deref()
                .is_some_and(|c| c.starts_with(SUMMARY_PREFIX))
        });
        assert!(
            summary
                .unwrap()
                .content
                .as_deref()
                .unwrap()
                .contains("the summary")
        );
        assert!(plan(&convo(2), 3, 20).is_none(), "nothing to compress");
    }

    #[test]
    fn estimates_grow_with_text() {
        assert!(estimate_tokens(&convo(10)) > estimate_tokens(&convo(2)));
    }
}
