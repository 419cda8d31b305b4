//! One test per alternation rule (see the table in `alternation.rs`).

use super::*;

fn call(id: &str, name: &str) -> ToolCall {
    ToolCall::new(id, name, "{}")
}

fn calls(ids: &[&str]) -> ChatMessage {
    ChatMessage::assistant_tool_calls(None, ids.iter().map(|id| call(id, "f")).collect())
}

fn result(id: &str, text: &str) -> ChatMessage {
    ChatMessage::tool_result(id, "f", text)
}

/// A compact picture of a history: `role:text`, tool results as `tool[id]:text`.
fn shape(messages: &[ChatMessage]) -> Vec<String> {
    messages
        .iter()
        .map(|m| match m.role {
            Role::System => format!("system:{}", m.text()),
            Role::User => format!("user:{}", m.text()),
            Role::Assistant if m.tool_calls.is_empty() => format!("assistant:{}", m.text()),
            Role::Assistant => {
                let ids: Vec<&str> = m.tool_calls.iter().map(|c| c.id.as_str()).collect();
                format!("assistant:{}{:?}", m.text(), ids)
            }
            Role::Tool => format!(
                "tool[{}]:{}",
                m.tool_call_id.as_deref().unwrap_or(""),
                m.text()
            ),
        })
        .collect()
}

fn enforced(messages: Vec<ChatMessage>) -> Vec<String> {
    shape(&enforce_alternation(messages).expect("history should be accepted"))
}

#[test]
fn a_valid_history_passes_unchanged() {
    let history = vec![
        ChatMessage::system("be brief"),
        ChatMessage::user("list files"),
        calls(&["a", "b"]),
        result("b", "2"),
        result("a", "1"),
        ChatMessage::assistant("done"),
        ChatMessage::user("thanks"),
    ];
    assert_eq!(enforce_alternation(history.clone()).unwrap(), history);
}

#[test]
fn leading_system_messages_merge_and_a_later_one_is_rejected() {
    let merged = enforced(vec![
        ChatMessage::system("one"),
        ChatMessage::system("two"),
        ChatMessage::user("hi"),
    ]);
    assert_eq!(merged, ["system:one\n\ntwo", "user:hi"]);

    let err = enforce_alternation(vec![
        ChatMessage::user("hi"),
        ChatMessage::assistant("hello"),
        ChatMessage::system("new rules"),
        ChatMessage::user("go"),
    ])
    .unwrap_err();
    assert_eq!(err, HistoryError::MisplacedSystem { index: 2 });
}

#[test]
fn consecutive_user_messages_merge() {
    let history = vec![
        ChatMessage::user("first"),
        ChatMessage::user("second"),
        ChatMessage::assistant("ok"),
        ChatMessage::user("third"),
    ];
    assert_eq!(
        enforced(history),
        ["user:first\n\nsecond", "assistant:ok", "user:third"]
    );
}

#[test]
fn consecutive_assistant_messages_merge_keeping_the_later_calls() {
    let mut with_calls = calls(&["a"]);
    with_calls.content = Some("checking".into());
    let history = vec![
        ChatMessage::user("q"),
        ChatMessage::assistant("thinking aloud"),
        with_calls,
        result("a", "1"),
    ];
    assert_eq!(
        enforced(history),
        [
            "user:q",
            "assistant:thinking aloud\n\nchecking[\"a\"]",
            "tool[a]:1"
        ]
    );
}

#[test]
fn empty_assistant_messages_are_dropped() {
    let history = vec![
        ChatMessage::user("a"),
        ChatMessage::assistant(""),
        ChatMessage::user("b"),
    ];
    assert_eq!(enforced(history), ["user:a\n\nb"]);
}

#[test]
fn unanswered_calls_get_a_placeholder_result_after_the_real_ones() {
    let history = vec![
        ChatMessage::user("q"),
        calls(&["a", "b", "c"]),
        result("b", "2"),
        ChatMessage::assistant("partial"),
        ChatMessage::user("and?"),
    ];
    assert_eq!(
        enforced(history),
        [
            "user:q",
            "assistant:[\"a\", \"b\", \"c\"]",
            "tool[b]:2",
            "tool[a]:[tool result unavailable]",
            "tool[c]:[tool result unavailable]",
            "assistant:partial",
            "user:and?"
        ]
    );
}

#[test]
fn calls_at_the_end_of_the_history_are_answered_too() {
    let history = vec![ChatMessage::user("q"), calls(&["a"])];
    assert_eq!(
        enforced(history),
        [
            "user:q",
            "assistant:[\"a\"]",
            "tool[a]:[tool result unavailable]"
        ]
    );
}

#[test]
fn orphan_duplicate_and_late_tool_results_are_dropped() {
    let history = vec![
        result("x", "leading orphan"),
        ChatMessage::user("q"),
        calls(&["a"]),
        result("a", "1"),
        result("a", "again"),
        result("zzz", "unknown id"),
        ChatMessage::assistant("ok"),
        result("a", "late"),
        ChatMessage::user("next"),
    ];
    assert_eq!(
        enforced(history),
        [
            "user:q",
            "assistant:[\"a\"]",
            "tool[a]:1",
            "assistant:ok",
            "user:next"
        ]
    );
}

#[test]
fn a_result_separated_from_its_call_is_replaced_by_a_placeholder() {
    let history = vec![
        ChatMessage::user("q"),
        calls(&["a"]),
        ChatMessage::user("hurry"),
        result("a", "too late"),
    ];
    assert_eq!(
        enforced(history),
        [
            "user:q",
            "assistant:[\"a\"]",
            "tool[a]:[tool result unavailable]",
            "assistant:[turn interrupted]",
            "user:hurry"
        ]
    );
}

#[test]
fn tool_results_followed_by_a_user_get_an_interrupted_turn() {
    let history = vec![
        ChatMessage::user("q"),
        calls(&["a"]),
        result("a", "1"),
        ChatMessage::user("stop, do this instead"),
    ];
    assert_eq!(
        enforced(history),
        [
            "user:q",
            "assistant:[\"a\"]",
            "tool[a]:1",
            "assistant:[turn interrupted]",
            "user:stop, do this instead"
        ]
    );
}

#[test]
fn a_leading_assistant_gets_an_opening_user_message() {
    let history = vec![
        ChatMessage::system("s"),
        ChatMessage::assistant("Daily report: all good"),
        ChatMessage::user("thanks"),
    ];
    assert_eq!(
        enforced(history),
        [
            "system:s",
            "user:[continued]",
            "assistant:Daily report: all good",
            "user:thanks"
        ]
    );
}

#[test]
fn calls_without_ids_or_names_and_duplicate_ids_are_fixed() {
    let message = ChatMessage::assistant_tool_calls(
        None,
        vec![call("", "f"), call("dup", ""), call("dup", "g")],
    );
    let fixed = enforce_alternation(vec![ChatMessage::user("q"), message]).unwrap();
    let ids: Vec<(&str, &str)> = fixed[1]
        .tool_calls
        .iter()
        .map(|c| (c.id.as_str(), c.name.as_str()))
        .collect();
    assert_eq!(ids, [("call_1_0", "f"), ("dup", INVALID_TOOL_NAME)]);
    assert_eq!(
        fixed.len(),
        4,
        "both remaining calls answered: {:?}",
        shape(&fixed)
    );
}

#[test]
fn histories_with_nothing_to_answer_are_rejected() {
    assert_eq!(enforce_alternation(vec![]), Err(HistoryError::Empty));
    assert_eq!(
        enforce_alternation(vec![ChatMessage::system("s")]),
        Err(HistoryError::Empty)
    );
    assert_eq!(
        enforce_alternation(vec![ChatMessage::user("q"), ChatMessage::assistant("a")]),
        Err(HistoryError::EndsWithAssistant)
    );
}
