//! The gateway's reply delivery against a scripted platform: long replies arrive complete,
//! in order and within the platform's limit in its own unit; quoting follows
//! `reply_to_mode`; retries follow Hermes's backoff on a paused clock; ambiguous sends are
//! never repeated; formatting and length refusals fall back instead of failing.

mod support;

use std::sync::Arc;
use std::time::Duration;

use hermes_adapter::{LengthUnit, SendErrorKind, SendResult};
use hermesd::config::ReplyToMode;
use hermesd::gateway::delivery::{
    Deliverer, DeliveryOutcome, FAILURE_NOTICE, FORMAT_FALLBACK_PREFIX, Jitter, RetryPolicy,
};
use regex::Regex;
use support::scripted_adapter::ScriptedAdapter;

fn deliverer(adapter: &Arc<ScriptedAdapter>, policy: RetryPolicy) -> Deliverer {
    Deliverer::new(adapter.clone(), policy)
}

fn fixed_jitter(ms: u64) -> RetryPolicy {
    RetryPolicy {
        jitter: Jitter::Fixed(Duration::from_millis(ms)),
        ..RetryPolicy::default()
    }
}

/// Every non-whitespace character of the sent bodies, with chunk indicators removed.
fn delivered_content(texts: &[String]) -> String {
    let indicator = Regex::new(r" \(\d+/\d+\)").unwrap();
    let mut all = String::new();
    for text in texts {
        // Re-chunked pieces carry nested indicators; strip until none is left at the end.
        let mut body = text.clone();
        while let Some(m) = indicator
            .find_iter(&body)
            .last()
            .filter(|m| m.end() == body.len())
        {
            body.truncate(m.start());
        }
        all.push_str(&body);
    }
    all.chars().filter(|c| !c.is_whitespace()).collect()
}

fn no_whitespace(text: &str) -> String {
    text.chars().filter(|c| !c.is_whitespace()).collect()
}

fn mixed_text(lines: usize) -> String {
    (0..lines)
        .map(|i| format!("line {i} 😀 中文字符 and some words {i}\n"))
        .collect()
}

async fn run(
    adapter: &Arc<ScriptedAdapter>,
    text: &str,
    mode: ReplyToMode,
) -> hermesd::gateway::delivery::DeliveryReport {
    deliverer(adapter, RetryPolicy::seeded(1))
        .deliver("42", None, text, Some("u1".into()), mode)
        .await
}

#[tokio::test]
async fn long_replies_arrive_complete_in_order_within_the_limit_in_the_platforms_unit() {
    for (unit, limit) in [(LengthUnit::Utf16, 200), (LengthUnit::Chars, 150)] {
        let adapter = Arc::new(ScriptedAdapter::new(limit, unit));
        // Emoji-dense prose with an occasional newline: UTF-16 and characters differ a lot.
        let text = format!("{}{}", "😀😀😀 中文 words ".repeat(150), mixed_text(20));
        let report = run(&adapter, &text, ReplyToMode::Off).await;
        assert_eq!(report.outcome, DeliveryOutcome::Delivered);
        let texts: Vec<String> = adapter.texts().into_iter().map(|t| t.0).collect();
        let total = texts.len();
        assert!(total > 5, "{unit:?}: {total} chunks");
        assert_eq!(report.sent_message_ids.len(), total);
        for (i, chunk) in texts.iter().enumerate() {
            assert!(unit.measure(chunk) <= limit, "{unit:?} chunk {i} too long");
            assert!(
                chunk.ends_with(&format!(" ({}/{total})", i + 1)),
                "{chunk:?}"
            );
        }
        assert_eq!(delivered_content(&texts), no_whitespace(&text));
        if unit == LengthUnit::Chars {
            // Measured in characters, not UTF-16: emoji would push some chunks over.
            assert!(texts.iter().any(|c| LengthUnit::Utf16.measure(c) > limit));
        }
    }
}

#[tokio::test]
async fn reply_to_mode_decides_which_chunks_quote_the_user() {
    let text = mixed_text(40);
    for (mode, expected) in [
        (ReplyToMode::Off, [None, None, None]),
        (ReplyToMode::First, [Some("u1"), None, None]),
        (ReplyToMode::All, [Some("u1"), Some("u1"), Some("u1")]),
    ] {
        let adapter = Arc::new(ScriptedAdapter::new(400, LengthUnit::Chars));
        run(&adapter, &text, mode).await;
        let quotes: Vec<Option<String>> = adapter.texts().into_iter().map(|t| t.1).collect();
        assert!(quotes.len() >= 3);
        assert_eq!(
            quotes[..3],
            expected.map(|q| q.map(str::to_owned)),
            "{mode:?}"
        );
        assert!(quotes[3..].iter().all(|q| *q == quotes[2]));
    }
}

#[tokio::test(start_paused = true)]
async fn a_rate_limit_waits_retry_after_plus_jitter_then_succeeds() {
    let adapter = Arc::new(ScriptedAdapter::new(4096, LengthUnit::Utf16));
    adapter.answer(SendResult::rate_limited(Duration::from_secs(5)));
    let report = deliverer(&adapter, fixed_jitter(300))
        .deliver("42", None, "hi", None, ReplyToMode::Off)
        .await;
    assert_eq!(report.outcome, DeliveryOutcome::Delivered);
    let times = adapter.send_times();
    assert_eq!(times.len(), 2);
    assert_eq!(times[1] - times[0], Duration::from_millis(5300));

    // With random jitter: exactly retry_after plus less than a second.
    let adapter = Arc::new(ScriptedAdapter::new(4096, LengthUnit::Utf16));
    adapter.answer(SendResult::rate_limited(Duration::from_secs(5)));
    let report = run(&adapter, "hi", ReplyToMode::Off).await;
    assert_eq!(report.outcome, DeliveryOutcome::Delivered);
    let gap = adapter.send_times()[1] - adapter.send_times()[0];
    assert!(
        gap >= Duration::from_secs(5) && gap < Duration::from_secs(6),
        "{gap:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn transient_failures_back_off_exponentially_then_succeed() {
    let adapter = Arc::new(ScriptedAdapter::new(4096, LengthUnit::Utf16));
    adapter
        .answer(SendResult::failed(SendErrorKind::Transient, "502"))
        .answer(SendResult::failed(
            SendErrorKind::Unknown,
            "ConnectionResetError",
        ));
    let report = deliverer(&adapter, fixed_jitter(250))
        .deliver("42", None, "hi", None, ReplyToMode::Off)
        .await;
    assert_eq!(report.outcome, DeliveryOutcome::Delivered);
    assert_eq!(report.sent_message_ids, ["m1"]);
    let t = adapter.send_times();
    assert_eq!(t.len(), 3);
    assert_eq!(t[1] - t[0], Duration::from_millis(2250));
    assert_eq!(t[2] - t[1], Duration::from_millis(4250));
}

#[tokio::test(start_paused = true)]
async fn exhausted_retries_send_the_failure_notice_once_and_stop() {
    let adapter = Arc::new(ScriptedAdapter::new(400, LengthUnit::Chars));
    for _ in 0..3 {
        adapter.answer(SendResult::failed(SendErrorKind::Transient, "503"));
    }
    let report = run(&adapter, &mixed_text(20), ReplyToMode::First).await;
    let DeliveryOutcome::Failed { error } = &report.outcome else {
        panic!("{report:?}");
    };
    assert_eq!(error.kind, SendErrorKind::Transient);
    let texts = adapter.texts();
    assert_eq!(texts.len(), 4, "three attempts of chunk 1, then the notice");
    assert!(texts[..3].iter().all(|t| t.0 == texts[0].0));
    assert_eq!(texts[3].0, FAILURE_NOTICE);
    assert_eq!(report.sent_message_ids, ["m1"], "only the notice went out");
}

#[tokio::test(start_paused = true)]
async fn an_ambiguous_send_is_reported_and_never_repeated() {
    let adapter = Arc::new(ScriptedAdapter::new(400, LengthUnit::Chars));
    adapter
        .answer(SendResult::sent(Some("first".into())))
        .answer(SendResult::failed(
            SendErrorKind::Ambiguous,
            "read timed out",
        ));
    let report = run(&adapter, &mixed_text(20), ReplyToMode::Off).await;
    assert_eq!(
        report.outcome,
        DeliveryOutcome::Ambiguous {
            after_chunk: 1,
            error: "read timed out".into()
        }
    );
    assert_eq!(report.sent_message_ids, ["first"]);
    assert_eq!(
        adapter.texts().len(),
        2,
        "no re-send, no notice, no later chunk"
    );

    // An unclassified read timeout is just as ambiguous.
    let adapter = Arc::new(ScriptedAdapter::new(400, LengthUnit::Chars));
    adapter.answer(SendResult::failed(
        SendErrorKind::Unknown,
        "ReadTimeout: timed out",
    ));
    let report = run(&adapter, "hi", ReplyToMode::Off).await;
    assert!(matches!(
        report.outcome,
        DeliveryOutcome::Ambiguous { after_chunk: 0, .. }
    ));
    assert_eq!(adapter.texts().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_formatting_refusal_is_resent_as_plain_text_then_as_the_fallback() {
    let adapter = Arc::new(ScriptedAdapter::new(4096, LengthUnit::Utf16));
    adapter.answer(SendResult::failed(
        SendErrorKind::BadFormat,
        "can't parse entities",
    ));
    let report = run(&adapter, "*bold", ReplyToMode::All).await;
    assert_eq!(report.outcome, DeliveryOutcome::Delivered);
    let texts = adapter.texts();
    assert_eq!(texts.len(), 2);
    assert_eq!(texts[0], ("*bold".into(), Some("u1".into()), false));
    assert_eq!(texts[1], ("*bold".into(), Some("u1".into()), true));

    let adapter = Arc::new(ScriptedAdapter::new(4096, LengthUnit::Utf16));
    for _ in 0..2 {
        adapter.answer(SendResult::failed(SendErrorKind::BadFormat, "can't parse"));
    }
    let report = run(&adapter, "*bold", ReplyToMode::Off).await;
    assert_eq!(report.outcome, DeliveryOutcome::Delivered);
    let texts = adapter.texts();
    assert_eq!(texts.len(), 3);
    assert_eq!(texts[2].0, format!("{FORMAT_FALLBACK_PREFIX}*bold"));
    assert!(texts[2].2, "the fallback is plain");

    // A forbidden chat fails at once: no retries, no fallback, no notice.
    let adapter = Arc::new(ScriptedAdapter::new(4096, LengthUnit::Utf16));
    adapter.answer(SendResult::failed(
        SendErrorKind::Forbidden,
        "bot was blocked",
    ));
    let report = run(&adapter, "hi", ReplyToMode::Off).await;
    assert!(matches!(report.outcome, DeliveryOutcome::Failed { .. }));
    assert_eq!(adapter.texts().len(), 1);
}

#[tokio::test]
async fn a_platform_that_refuses_the_length_gets_smaller_pieces_and_everything() {
    let adapter = Arc::new(ScriptedAdapter::new(1000, LengthUnit::Utf16).with_real_limit(300));
    let text = mixed_text(80);
    let report = run(&adapter, &text, ReplyToMode::Off).await;
    assert_eq!(report.outcome, DeliveryOutcome::Delivered);
    let texts = adapter.texts();
    let delivered: Vec<String> = texts
        .iter()
        .filter(|t| LengthUnit::Utf16.measure(&t.0) <= 300)
        .map(|t| t.0.clone())
        .collect();
    assert!(
        delivered.len() < texts.len(),
        "some pieces were refused first"
    );
    assert_eq!(report.sent_message_ids.len(), delivered.len());
    assert_eq!(delivered_content(&delivered), no_whitespace(&text));
}
