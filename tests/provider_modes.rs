//! The three API modes against the fake model over real HTTP, each streamed and not: text,
//! parallel tool calls, reasoning, usage, and the real-world variations (missing usage,
//! unknown finish reasons, empty answers, malformed or cut-off replies).

mod support;

use hermesd::agent::message::ToolCall;
use hermesd::agent::provider::{ApiMode, FinishReason, StreamDelta, Usage};
use serde_json::json;
use support::fake_model::{FakeModel, FakeUsage, Reply, Step};
use support::providers::{MODES, client, complete, only_error, request, streamed};

/// Every mode, streamed and not.
fn cases() -> impl Iterator<Item = (ApiMode, bool)> {
    MODES
        .into_iter()
        .flat_map(|mode| [(mode, false), (mode, true)])
}

#[tokio::test]
async fn text_replies_and_streamed_deltas_agree() {
    for (mode, stream) in cases() {
        let fake = FakeModel::start().await;
        fake.push(Step::text("Hello there, world"));
        let (result, deltas) = complete(&client(&fake, mode), &request("hi", stream)).await;
        let reply = result.unwrap_or_else(|e| panic!("{mode} stream={stream}: {e}"));
        assert_eq!(
            reply.content.as_deref(),
            Some("Hello there, world"),
            "{mode} {stream}"
        );
        assert_eq!(reply.finish_reason, FinishReason::Stop, "{mode} {stream}");
        assert!(reply.tool_calls.is_empty());
        assert_eq!(
            (reply.provider.as_str(), reply.model.as_str()),
            ("fake", "fake-model")
        );
        assert_eq!(reply.usage.api_calls, 1);
        if stream {
            assert!(deltas.len() >= 3, "{mode}: token by token, got {deltas:?}");
            assert_eq!(streamed(&deltas).0, "Hello there, world", "{mode}");
        } else {
            assert!(deltas.is_empty(), "{mode}: nothing streamed without stream");
        }
        let sent = &fake.requests()[0];
        assert_eq!(sent.is_stream(), stream, "{mode}");
    }
}

#[tokio::test]
async fn parallel_tool_calls_come_back_in_order() {
    for (mode, stream) in cases() {
        let fake = FakeModel::start().await;
        let reply = Reply::default()
            .with_text("Checking both.")
            .with_tool_call("get_weather", json!({"city": "Paris"}))
            .with_tool_call("get_time", json!({"zone": "Europe/Paris", "utc": false}));
        fake.push(Step::Reply(reply));
        let (result, _) = complete(&client(&fake, mode), &request("weather?", stream)).await;
        let reply = result.unwrap_or_else(|e| panic!("{mode} stream={stream}: {e}"));
        assert_eq!(
            reply.tool_calls,
            [
                ToolCall::new("call_1", "get_weather", r#"{"city":"Paris"}"#),
                ToolCall::new(
                    "call_2",
                    "get_time",
                    r#"{"utc":false,"zone":"Europe/Paris"}"#
                ),
            ],
            "{mode} stream={stream}"
        );
        assert_eq!(reply.content.as_deref(), Some("Checking both."));
        assert_eq!(
            reply.finish_reason,
            FinishReason::ToolCalls,
            "{mode} {stream}"
        );
    }
}

#[tokio::test]
async fn reasoning_is_kept_apart_from_the_answer() {
    for (mode, stream) in cases() {
        let fake = FakeModel::start().await;
        fake.push(Step::Reply(
            Reply::text("42").with_reasoning("Six times seven is forty-two."),
        ));
        let (result, deltas) = complete(&client(&fake, mode), &request("6*7?", stream)).await;
        let reply = result.unwrap_or_else(|e| panic!("{mode} stream={stream}: {e}"));
        assert_eq!(reply.content.as_deref(), Some("42"));
        assert_eq!(
            reply.reasoning.as_deref(),
            Some("Six times seven is forty-two."),
            "{mode} stream={stream}"
        );
        if stream {
            let (text, reasoning) = streamed(&deltas);
            assert_eq!(
                (text.as_str(), reasoning.as_str()),
                ("42", "Six times seven is forty-two.")
            );
            assert!(
                matches!(deltas[0], StreamDelta::Reasoning(_)),
                "{mode}: reasoning first"
            );
        }
        assert_eq!(reply.to_message().reasoning, reply.reasoning);
    }
}

#[tokio::test]
async fn usage_is_read_into_the_hermes_buckets() {
    let counts = FakeUsage {
        input: 100,
        output: 20,
        cache_read: 300,
        cache_write: 40,
        reasoning: 7,
    };
    for (mode, stream) in cases() {
        let fake = FakeModel::start().await;
        fake.push(Step::Reply(Reply::text("ok").with_usage(counts)));
        let (result, _) = complete(&client(&fake, mode), &request("hi", stream)).await;
        let usage = result
            .unwrap_or_else(|e| panic!("{mode} stream={stream}: {e}"))
            .usage;
        // Each wire format carries a different subset; what it carries must land in place.
        let expected = match mode {
            ApiMode::ChatCompletions => Usage {
                input_tokens: 100,
                output_tokens: 20,
                cache_read_tokens: 300,
                cache_write_tokens: 40,
                reasoning_tokens: 7,
                api_calls: 1,
            },
            ApiMode::AnthropicMessages => Usage {
                input_tokens: 100,
                output_tokens: 20,
                cache_read_tokens: 300,
                cache_write_tokens: 40,
                reasoning_tokens: 0,
                api_calls: 1,
            },
            ApiMode::CodexResponses => Usage {
                input_tokens: 100,
                output_tokens: 20,
                cache_read_tokens: 300,
                cache_write_tokens: 0,
                reasoning_tokens: 7,
                api_calls: 1,
            },
        };
        assert_eq!(usage, expected, "{mode} stream={stream}");
    }
}

#[tokio::test]
async fn missing_usage_is_zero_not_an_error() {
    for (mode, stream) in cases() {
        let fake = FakeModel::start().await;
        fake.push(Step::Reply(Reply::text("ok").without_usage()));
        let (result, _) = complete(&client(&fake, mode), &request("hi", stream)).await;
        let usage = result
            .unwrap_or_else(|e| panic!("{mode} stream={stream}: {e}"))
            .usage;
        assert_eq!(
            usage,
            Usage {
                api_calls: 1,
                ..Usage::default()
            },
            "{mode} {stream}"
        );
    }
}

#[tokio::test]
async fn unknown_finish_reasons_are_kept_verbatim() {
    for (mode, stream) in cases() {
        let fake = FakeModel::start().await;
        fake.push(Step::Reply(
            Reply::text("partial").with_finish_reason("eaten_by_a_grue"),
        ));
        let (result, _) = complete(&client(&fake, mode), &request("hi", stream)).await;
        let reply = result.unwrap_or_else(|e| panic!("{mode} stream={stream}: {e}"));
        assert_eq!(
            reply.finish_reason,
            FinishReason::Other("eaten_by_a_grue".into()),
            "{mode} {stream}"
        );
        assert_eq!(reply.content.as_deref(), Some("partial"));
    }
}

#[tokio::test]
async fn a_length_cutoff_is_reported_as_length() {
    for (mode, stream) in cases() {
        let fake = FakeModel::start().await;
        let limit = match mode {
            ApiMode::AnthropicMessages => "max_tokens",
            _ => "length",
        };
        fake.push(Step::Reply(
            Reply::text("truncated answ").with_finish_reason(limit),
        ));
        let (result, _) = complete(&client(&fake, mode), &request("hi", stream)).await;
        let reply = result.unwrap_or_else(|e| panic!("{mode} stream={stream}: {e}"));
        assert_eq!(reply.finish_reason, FinishReason::Length, "{mode} {stream}");
    }
}

#[tokio::test]
async fn empty_answers_give_a_clear_error_or_an_empty_reply() {
    for (mode, stream) in cases() {
        let fake = FakeModel::start().await;
        fake.push(Step::EmptyChoices);
        let (result, _) = complete(&client(&fake, mode), &request("hi", stream)).await;
        match mode {
            // An empty content list is a (useless but valid) answer in the Messages API.
            ApiMode::AnthropicMessages => {
                let reply = result.unwrap_or_else(|e| panic!("stream={stream}: {e}"));
                assert_eq!(
                    (reply.content, reply.finish_reason),
                    (None, FinishReason::Stop)
                );
            }
            _ => {
                let error = result.expect_err("no choices is no answer");
                let error = only_error(&error);
                assert_eq!(error.kind(), "bad_response", "{mode} {stream}");
                let text = error.to_string();
                assert!(
                    text.contains("no choices") || text.contains("no output"),
                    "{mode}: {text}"
                );
            }
        }
    }
}

#[tokio::test]
async fn malformed_and_cut_off_replies_are_bad_responses() {
    for (mode, stream) in cases() {
        let fake = FakeModel::start().await;
        fake.push(Step::Malformed);
        fake.push(Step::Truncated(Reply::text("never finished")));
        let client = client(&fake, mode);
        for what in ["malformed", "truncated"] {
            let (result, _) = complete(&client, &request("hi", stream)).await;
            let error = result.expect_err(what);
            assert_eq!(
                only_error(&error).kind(),
                "bad_response",
                "{mode} {stream} {what}: {error}"
            );
        }
    }
}

#[tokio::test]
async fn a_json_answer_to_a_stream_request_is_used_whole() {
    for mode in MODES {
        let fake = FakeModel::start().await;
        let body = match mode {
            ApiMode::ChatCompletions => {
                json!({"choices": [{"message": {"content": "whole"}, "finish_reason": "stop"}]})
            }
            ApiMode::AnthropicMessages => {
                json!({"content": [{"type": "text", "text": "whole"}], "stop_reason": "end_turn"})
            }
            ApiMode::CodexResponses => {
                json!({"status": "completed", "output": [{"type": "message", "content": [{"type": "output_text", "text": "whole"}]}]})
            }
        };
        fake.push(Step::Raw {
            status: 200,
            content_type: "application/json".into(),
            body: body.to_string(),
        });
        let (result, deltas) = complete(&client(&fake, mode), &request("hi", true)).await;
        assert_eq!(result.unwrap().content.as_deref(), Some("whole"), "{mode}");
        assert_eq!(deltas, [StreamDelta::Text("whole".into())], "{mode}");
    }
}

#[tokio::test]
async fn an_empty_script_echoes_the_last_user_message() {
    for (mode, stream) in cases() {
        let fake = FakeModel::start().await;
        let (result, _) = complete(&client(&fake, mode), &request("ping 42", stream)).await;
        let reply = result.unwrap_or_else(|e| panic!("{mode} stream={stream}: {e}"));
        assert_eq!(
            reply.content.as_deref(),
            Some("echo: ping 42"),
            "{mode} {stream}"
        );
    }
}

/// End-to-end tests of the binary and benchmarks run the fake outside any test runtime.
#[test]
fn the_fake_also_serves_from_a_thread_of_its_own() {
    let fake = FakeModel::start_in_background();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for mode in MODES {
        let (result, _) = runtime.block_on(complete(&client(&fake, mode), &request("bg", true)));
        assert_eq!(
            result.unwrap().content.as_deref(),
            Some("echo: bg"),
            "{mode}"
        );
    }
    assert_eq!(fake.requests().len(), 3);
}

#[tokio::test]
async fn an_event_stream_answer_to_a_plain_request_is_read_whole() {
    let fake = FakeModel::start().await;
    let chunks = [
        json!({"choices": [{"index": 0, "delta": {"content": "streamed "}}]}),
        json!({"choices": [{"index": 0, "delta": {"content": "anyway"}, "finish_reason": "stop"}]}),
    ];
    let body: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    fake.push(Step::Raw {
        status: 200,
        content_type: "text/event-stream; charset=utf-8".into(),
        body: body + "data: [DONE]\n\n",
    });
    let client = client(&fake, ApiMode::ChatCompletions);
    let (result, deltas) = complete(&client, &request("hi", false)).await;
    assert_eq!(result.unwrap().content.as_deref(), Some("streamed anyway"));
    assert!(
        deltas.is_empty(),
        "a plain request streams nothing to the caller"
    );
}
