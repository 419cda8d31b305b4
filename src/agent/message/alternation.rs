//! The seed's role-alternation rules, enforced before every model call.
//!
//! A valid history is: optional leading system message, then `user`, then assistant turns and
//! user turns alternating, where an assistant turn that asks for tools is followed by exactly
//! one `tool` result per call (in any order) and then by another assistant turn. Providers
//! reject anything else, often with an unhelpful 400 or an empty reply.
//!
//! Histories go wrong in practice (a turn interrupted mid-tool, a crash between saving the
//! user's message and the reply, a compressed or hand-edited transcript), so each violation
//! is either repaired or rejected. The rule: repair when the intent is unambiguous and no
//! user-visible text is invented beyond a bracketed placeholder; reject when the history is
//! a programming error that a repair would hide.
//!
//! | Violation                                   | Choice                                            |
//! |---------------------------------------------|---------------------------------------------------|
//! | several leading system messages             | repair: merged into one                           |
//! | a system message after the first user/assistant | reject ([`HistoryError::MisplacedSystem`]): moving instructions changes their meaning |
//! | two user messages in a row                  | repair: merged (blank line between), nothing lost |
//! | two assistant messages in a row             | repair: merged; text joined, the later one's tool calls kept |
//! | an assistant message with no text and no calls | repair: dropped (it says nothing)              |
//! | a tool call without a result                | repair: a `"[tool result unavailable]"` result is added after the real ones |
//! | a tool result that answers no open call (orphan, late, or second answer) | repair: dropped |
//! | a tool call with no id / duplicate id in one message / no name | repair: deterministic id / later duplicate dropped / named `invalid_tool_call` |
//! | tool results followed by a user message     | repair: a `"[turn interrupted]"` assistant turn is inserted |
//! | the conversation starts with an assistant   | repair: a `"[continued]"` user message is inserted |
//! | nothing but system messages                 | reject ([`HistoryError::Empty`])                  |
//! | ends with an assistant message              | reject ([`HistoryError::EndsWithAssistant`]): there is nothing to answer |

use std::collections::HashSet;
use std::fmt;

use super::{ChatMessage, Role, ToolCall};

/// The result added for a tool call whose result is missing.
pub const MISSING_TOOL_RESULT: &str = "[tool result unavailable]";
/// The assistant turn inserted between tool results and a following user message.
pub const INTERRUPTED_TURN: &str = "[turn interrupted]";
/// The user message inserted before a conversation that starts with the assistant.
pub const OPENING_PLACEHOLDER: &str = "[continued]";
/// The name given to a tool call that has none, so its result stays paired with it.
pub const INVALID_TOOL_NAME: &str = "invalid_tool_call";

/// A history that cannot be sent and should not be repaired.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HistoryError {
    #[error("the conversation has no messages to send")]
    Empty,
    #[error(
        "message {index} is a system message in the middle of the conversation; only the first messages may be system messages"
    )]
    MisplacedSystem { index: usize },
    #[error("the conversation ends with an assistant message, so there is nothing to answer")]
    EndsWithAssistant,
}

/// Checks `messages` against the alternation rules, returning the repaired history or the
/// reason it cannot be sent. The module documentation lists every rule and its choice.
pub fn enforce_alternation(messages: Vec<ChatMessage>) -> Result<Vec<ChatMessage>, HistoryError> {
    let mut messages = messages.into_iter().enumerate().peekable();
    let mut sequence = Sequence::default();
    let mut system: Option<ChatMessage> = None;
    while let Some((_, message)) = messages.next_if(|(_, m)| m.role == Role::System) {
        match &mut system {
            None => system = Some(message),
            Some(first) => {
                first.content = join(first.content.take(), message.content);
                sequence.repairs.merged_system += 1;
            }
        }
    }
    for (index, message) in messages {
        match message.role {
            Role::System => return Err(HistoryError::MisplacedSystem { index }),
            Role::User => sequence.user(message),
            Role::Assistant => sequence.assistant(message, index),
            Role::Tool => sequence.tool(message),
        }
    }
    sequence.close_tool_block();
    match sequence.out.last() {
        None => return Err(HistoryError::Empty),
        Some(last) if last.role == Role::Assistant => return Err(HistoryError::EndsWithAssistant),
        Some(_) => {}
    }
    if sequence.repairs.any() {
        tracing::warn!(repairs = %sequence.repairs, "repaired the conversation history before a model call");
    }
    Ok(system.into_iter().chain(sequence.out).collect())
}

#[derive(Default)]
struct Sequence {
    out: Vec<ChatMessage>,
    /// The calls of the last assistant turn, while its tool results are being read.
    open: Option<OpenCalls>,
    repairs: Repairs,
}

struct OpenCalls {
    calls: Vec<(String, String)>,
    answered: HashSet<String>,
}

impl Sequence {
    fn user(&mut self, message: ChatMessage) {
        self.close_tool_block();
        match self.out.last_mut() {
            Some(last) if last.role == Role::User => {
                last.content = join(last.content.take(), message.content);
                last.images.extend(message.images);
                self.repairs.merged_users += 1;
                return;
            }
            Some(last) if last.role == Role::Tool => {
                self.out.push(ChatMessage::assistant(INTERRUPTED_TURN));
                self.repairs.interrupted_turns += 1;
            }
            _ => {}
        }
        self.out.push(message);
    }

    fn assistant(&mut self, mut message: ChatMessage, index: usize) {
        self.close_tool_block();
        self.repairs.fixed_calls += normalize_calls(&mut message.tool_calls, index);
        if message.text().trim().is_empty() && message.tool_calls.is_empty() {
            self.repairs.dropped_empty += 1;
            return;
        }
        match self.out.last_mut() {
            None => {
                self.out.push(ChatMessage::user(OPENING_PLACEHOLDER));
                self.repairs.opening += 1;
            }
            // Text-only: one with calls is always followed by its (possibly synthetic) results.
            Some(last) if last.role == Role::Assistant => {
                last.content = join(last.content.take(), message.content);
                last.reasoning = join(last.reasoning.take(), message.reasoning);
                last.tool_calls = message.tool_calls;
                self.repairs.merged_assistants += 1;
                self.open = open_calls(&last.tool_calls);
                return;
            }
            Some(_) => {}
        }
        self.open = open_calls(&message.tool_calls);
        self.out.push(message);
    }

    fn tool(&mut self, message: ChatMessage) {
        let answers_open_call = match (&mut self.open, message.tool_call_id.as_deref()) {
            (Some(open), Some(id)) => {
                open.calls.iter().any(|(call, _)| call == id) && open.answered.insert(id.to_owned())
            }
            _ => false,
        };
        if answers_open_call {
            self.out.push(message);
        } else {
            self.repairs.dropped_results += 1;
        }
    }

    /// Ends the current tool block, answering every call that got no result.
    fn close_tool_block(&mut self) {
        let Some(open) = self.open.take() else {
            return;
        };
        for (id, name) in open.calls {
            if !open.answered.contains(&id) {
                self.out
                    .push(ChatMessage::tool_result(id, name, MISSING_TOOL_RESULT));
                self.repairs.synthetic_results += 1;
            }
        }
    }
}

fn open_calls(calls: &[ToolCall]) -> Option<OpenCalls> {
    (!calls.is_empty()).then(|| OpenCalls {
        calls: calls
            .iter()
            .map(|call| (call.id.clone(), call.name.clone()))
            .collect(),
        answered: HashSet::new(),
    })
}

/// Gives every call an id and a name and drops later calls reusing an id; returns the number
/// of fixes. Generated ids depend only on the position, so repeated calls send the same bytes
/// (and keep the provider's prompt cache warm).
fn normalize_calls(calls: &mut Vec<ToolCall>, message_index: usize) -> usize {
    let mut fixes = 0;
    let mut seen = HashSet::new();
    for (position, call) in calls.iter_mut().enumerate() {
        if call.id.trim().is_empty() {
            call.id = format!("call_{message_index}_{position}");
            fixes += 1;
        }
        if call.name.trim().is_empty() {
            call.name = INVALID_TOOL_NAME.to_owned();
            fixes += 1;
        }
    }
    let before = calls.len();
    calls.retain(|call| seen.insert(call.id.clone()));
    fixes + (before - calls.len())
}

/// Joins two optional texts with a blank line, skipping empty ones.
fn join(first: Option<String>, second: Option<String>) -> Option<String> {
    let parts: Vec<String> = [first, second]
        .into_iter()
        .flatten()
        .filter(|text| !text.trim().is_empty())
        .collect();
    if parts.is_empty() {
        None
    } else {
        Some(parts.join("\n\n"))
    }
}

#[derive(Default)]
struct Repairs {
    merged_system: usize,
    merged_users: usize,
    merged_assistants: usize,
    dropped_empty: usize,
    synthetic_results: usize,
    dropped_results: usize,
    fixed_calls: usize,
    interrupted_turns: usize,
    opening: usize,
}

impl Repairs {
    fn counts(&self) -> [(&'static str, usize); 9] {
        [
            ("merged_system", self.merged_system),
            ("merged_users", self.merged_users),
            ("merged_assistants", self.merged_assistants),
            ("dropped_empty_assistants", self.dropped_empty),
            ("synthetic_tool_results", self.synthetic_results),
            ("dropped_tool_results", self.dropped_results),
            ("fixed_tool_calls", self.fixed_calls),
            ("interrupted_turns", self.interrupted_turns),
            ("opening_placeholders", self.opening),
        ]
    }

    fn any(&self) -> bool {
        self.counts().iter().any(|(_, count)| *count > 0)
    }
}

impl fmt::Display for Repairs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (name, count) in self.counts().into_iter().filter(|(_, n)| *n > 0) {
            write!(f, "{}{name}={count}", if first { "" } else { " " })?;
            first = false;
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "alternation_tests.rs"]
mod tests;
