//! The compliance suite: what every adapter must do whatever its platform, checked against
//! the platform's fake through a [`ComplianceRig`]. A new adapter proves the contract by
//! implementing the rig and calling [`compliance_suite!`](crate::compliance_suite) (one test
//! per rule) or [`run_compliance_suite`] (all rules in one test).

use std::future::Future;
use std::time::Duration;

use super::{ManualCore, WAIT};
use crate::{
    Adapter, AdapterContext, Button, Outbound, OutboundKind, RecordOutcome, SendErrorKind,
};

/// The platform-specific glue: a fake platform with the adapter running against it, and the
/// few questions the suite asks about what the fake saw.
pub trait ComplianceRig: Sized {
    type Adapter: Adapter;

    /// Starts a fresh fake platform and the adapter running against it with `ctx`; returns
    /// once the adapter takes in messages.
    fn start(ctx: AdapterContext) -> impl Future<Output = Self>;

    fn adapter(&self) -> &Self::Adapter;

    /// Where the suite sends (a chat and thread the fake knows, where typing shows).
    fn target(&self) -> (String, Option<String>);

    /// A user writes `text` to the bot directly. Returns the platform's handle on that
    /// delivery, as [`ComplianceRig::acknowledged`] takes it.
    fn push_message(&self, text: &str) -> impl Future<Output = String>;

    /// The platform delivers an item whose payload the adapter cannot decode. Returns its
    /// delivery handle.
    fn push_undecodable(&self) -> impl Future<Output = String>;

    /// Whether the platform got its acknowledgement for `delivery` (an advanced offset, an
    /// envelope ack, on any redelivery of it); `None` on a platform that has none and never
    /// redelivers, where the adapter offers a failed hand-over again itself.
    fn acknowledged(&self, delivery: &str) -> Option<bool>;

    /// Lets the adapter run long enough that an early acknowledgement would have been
    /// sent (one more poll, a moment on the socket).
    fn settle(&self) -> impl Future<Output = ()> {
        tokio::time::sleep(Duration::from_millis(300))
    }

    /// The next send is refused with the platform's 429, asking to wait `retry_after`.
    fn rate_limit_next_send(&self, retry_after: Duration);

    /// The text the platform now shows for the bot's message `message_id`.
    fn shown_text(&self, message_id: &str) -> Option<String>;

    /// The labels of the buttons the platform shows under the bot's message `message_id`.
    fn shown_buttons(&self, message_id: &str) -> Vec<String>;

    /// How many typing indications the platform has shown so far.
    fn typing_shown(&self) -> usize;

    /// Stops the adapter (and checks the fake saw no call it does not serve).
    fn stop(self) -> impl Future<Output = ()>;
}

/// Runs every rule of the suite, each against a fresh fake.
pub async fn run_compliance_suite<R: ComplianceRig>() {
    acknowledges_only_after_the_record::<R>().await;
    a_failed_record_is_not_acknowledged_and_comes_back::<R>().await;
    a_dead_letter_is_kept_and_the_next_message_flows::<R>().await;
    a_rate_limit_is_typed_with_its_wait::<R>().await;
    capabilities_match_behaviour::<R>().await;
}

/// One `#[tokio::test]` per rule of the suite for the rig type given, so a failure names
/// the broken rule: `hermes_adapter::compliance_suite!(support::Rig);`.
#[macro_export]
macro_rules! compliance_suite {
    ($rig:ty) => {
        #[tokio::test]
        async fn compliance_acknowledges_only_after_the_record() {
            $crate::testing::acknowledges_only_after_the_record::<$rig>().await;
        }
        #[tokio::test]
        async fn compliance_a_failed_record_is_not_acknowledged_and_comes_back() {
            $crate::testing::a_failed_record_is_not_acknowledged_and_comes_back::<$rig>().await;
        }
        #[tokio::test]
        async fn compliance_a_dead_letter_is_kept_and_the_next_message_flows() {
            $crate::testing::a_dead_letter_is_kept_and_the_next_message_flows::<$rig>().await;
        }
        #[tokio::test]
        async fn compliance_a_rate_limit_is_typed_with_its_wait() {
            $crate::testing::a_rate_limit_is_typed_with_its_wait::<$rig>().await;
        }
        #[tokio::test]
        async fn compliance_capabilities_match_behaviour() {
            $crate::testing::capabilities_match_behaviour::<$rig>().await;
        }
    };
}

async fn start<R: ComplianceRig>() -> (R, ManualCore) {
    let core = ManualCore::new();
    let rig = R::start(core.ctx.clone()).await;
    (rig, core)
}

/// Waits until the platform has the acknowledgement of `delivery` (where it has any).
async fn wait_acknowledged<R: ComplianceRig>(rig: &R, delivery: &str) {
    let acked = async {
        while rig.acknowledged(delivery) == Some(false) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(WAIT, acked)
        .await
        .unwrap_or_else(|_| panic!("{delivery} was never acknowledged after it was recorded"));
}

fn assert_not_acknowledged<R: ComplianceRig>(rig: &R, delivery: &str, when: &str) {
    assert_ne!(
        rig.acknowledged(delivery),
        Some(true),
        "{delivery} was acknowledged {when}"
    );
}

/// The platform's acknowledgement (offset, envelope ack) goes out only once the core said
/// the event is recorded: a crash in between leaves it with the platform to redeliver.
pub async fn acknowledges_only_after_the_record<R: ComplianceRig>() {
    let (rig, mut core) = start::<R>().await;
    let delivery = rig.push_message("compliance: record me first").await;
    let inbound = core.next().await;
    assert_eq!(inbound.event.text, "compliance: record me first");
    rig.settle().await;
    assert_not_acknowledged(&rig, &delivery, "before the core recorded it");
    inbound.recorded.send(RecordOutcome::Recorded).ok();
    wait_acknowledged(&rig, &delivery).await;
    rig.stop().await;
}

/// A hand-over the core could not record is not acknowledged, and the same event (same
/// event id) is handed over again, by the platform's redelivery or the adapter's own retry.
pub async fn a_failed_record_is_not_acknowledged_and_comes_back<R: ComplianceRig>() {
    let (rig, mut core) = start::<R>().await;
    let delivery = rig.push_message("compliance: storage is down").await;
    let first = core.next().await;
    first.recorded.send(RecordOutcome::Failed).ok();
    let again = core.next().await;
    assert_eq!(
        again.event.event_id, first.event.event_id,
        "the failed event comes back under its id"
    );
    assert_not_acknowledged(&rig, &delivery, "although its record failed");
    again.recorded.send(RecordOutcome::Recorded).ok();
    wait_acknowledged(&rig, &delivery).await;
    rig.stop().await;
}

/// An item the adapter cannot decode is handed to the core as a dead letter, acknowledged
/// only once kept, and the message after it still arrives.
pub async fn a_dead_letter_is_kept_and_the_next_message_flows<R: ComplianceRig>() {
    let (rig, mut core) = start::<R>().await;
    let delivery = rig.push_undecodable().await;
    let handed = core.next_dead_letter().await;
    let platform = rig.adapter().platform();
    assert_eq!(handed.letter.platform, platform);
    assert!(!handed.letter.item_id.is_empty(), "{:?}", handed.letter);
    assert!(
        !handed.letter.raw.is_empty(),
        "the payload is kept as received"
    );
    assert!(!handed.letter.error.is_empty(), "the reason is kept");
    rig.settle().await;
    assert_not_acknowledged(&rig, &delivery, "before the core kept the dead letter");
    handed.recorded.send(RecordOutcome::Recorded).ok();
    wait_acknowledged(&rig, &delivery).await;

    rig.push_message("compliance: still there?").await;
    let next = core.next().await;
    assert_eq!(next.event.text, "compliance: still there?");
    next.recorded.send(RecordOutcome::Recorded).ok();
    rig.stop().await;
}

/// The platform's 429 becomes the contract's typed rate limit with the wait it asked for,
/// after one attempt (the core schedules the retry).
pub async fn a_rate_limit_is_typed_with_its_wait<R: ComplianceRig>() {
    let (rig, _core) = start::<R>().await;
    rig.rate_limit_next_send(Duration::from_secs(7));
    let result = send(&rig, text("compliance: slow down")).await;
    assert_eq!(
        result.kind(),
        Some(SendErrorKind::RateLimited),
        "{result:?}"
    );
    assert_eq!(result.retry_after, Some(Duration::from_secs(7)));
    rig.stop().await;
}

/// What the adapter declares it does against the fake, and what it does not declare it
/// does not pretend to: the message limit, edits, buttons, typing.
pub async fn capabilities_match_behaviour<R: ComplianceRig>() {
    let (rig, _core) = start::<R>().await;
    let caps = rig.adapter().capabilities();
    assert!(caps.message_limit > 0);

    let longest = "a".repeat(caps.message_limit);
    let sent = send(&rig, text(&longest)).await;
    assert!(
        sent.is_ok(),
        "a message at the declared limit is sent: {sent:?}"
    );
    let shown = sent.message_id.as_deref().and_then(|id| rig.shown_text(id));
    assert_eq!(
        shown.map(|t| caps.length_unit.measure(&t)),
        Some(caps.message_limit),
        "shown whole"
    );

    let draft = send(&rig, text("compliance draft")).await;
    let draft_id = draft.message_id.clone().expect("a sent message has an id");
    let edit = OutboundKind::Edit {
        message_id: draft_id.clone(),
        text: "compliance final".into(),
    };
    let edited = send(&rig, edit).await;
    if caps.edits {
        assert!(edited.is_ok(), "declared edits: {edited:?}");
        assert_eq!(
            rig.shown_text(&draft_id).as_deref(),
            Some("compliance final")
        );
    } else {
        assert!(
            !edited.is_ok(),
            "an edit it does not declare must not report success"
        );
    }

    let buttons = vec![
        Button {
            label: "Yes".into(),
            data: "/approve once".into(),
        },
        Button {
            label: "No".into(),
            data: "/deny".into(),
        },
    ];
    let prompt = OutboundKind::Prompt {
        text: "compliance: go ahead?".into(),
        buttons,
    };
    let prompted = send(&rig, prompt).await;
    assert!(
        prompted.is_ok(),
        "a prompt is sent with or without buttons: {prompted:?}"
    );
    let prompt_id = prompted.message_id.expect("a prompt has an id");
    let labels = rig.shown_buttons(&prompt_id);
    if caps.buttons {
        assert_eq!(labels, ["Yes", "No"], "declared buttons are shown");
    } else {
        assert!(labels.is_empty(), "no buttons where none are declared");
    }

    let before = rig.typing_shown();
    let typing = send(&rig, OutboundKind::Typing).await;
    assert!(typing.is_ok(), "{typing:?}");
    if caps.typing {
        assert!(rig.typing_shown() > before, "declared typing is shown");
    } else {
        assert_eq!(
            rig.typing_shown(),
            before,
            "no typing where none is declared"
        );
    }
    rig.stop().await;
}

fn text(text: &str) -> OutboundKind {
    OutboundKind::Text {
        text: text.to_owned(),
        reply_to: None,
        plain: false,
    }
}

async fn send<R: ComplianceRig>(rig: &R, kind: OutboundKind) -> crate::SendResult {
    let (chat_id, thread_id) = rig.target();
    let outbound = Outbound {
        chat_id,
        thread_id,
        kind,
    };
    tokio::time::timeout(WAIT, rig.adapter().send(outbound))
        .await
        .expect("a send finishes within the wait")
}
