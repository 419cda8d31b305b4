//! Platform sends are fenced by the lease that owns them (issue 28, defect 5), through the
//! real binary: an instance stopped (SIGSTOP) right after claiming a reply for its send
//! (`mark_attempting` committed, the answer not yet read), kept stopped until a survivor
//! took the reply over and sent it, then continued, sends no second copy: its lease's local
//! deadline passed while it was stopped, so the send is held back, and once its lease is
//! renewed the row is the survivor's. And at the store level: while this instance's lease
//! cannot be confirmed (its database connection stalled), a reply is neither claimed nor
//! sent; it stays owed and goes out once when a renewal lands. A tool call is fenced the
//! same way: a holder stopped right after storing the model's tool-call message, resumed
//! after the new holder ran the tool, does not run it a second time. And the other side of
//! the fence: a send that takes longer than one lease time on an instance whose lease keeps
//! being renewed is not cut off, so its reply is delivered once, plain.

#[path = "support/cluster.rs"]
mod cluster_support;
mod support;

use std::sync::Arc;
use std::time::Duration;

use cluster_support::{ClusterRig, WAIT};
use hermes_adapter::LengthUnit;
use hermesd::gateway::delivery::{Deliverer, DeliveryOutcome, ObligationDelivery, RetryPolicy};
use hermesd::state::{NewObligation, Store, StoreOptions};
use sqlx::postgres::PgPool;
use support::conditions::wait_until;
use support::fake_model::{Reply, Step};
use support::pg_proxy::PgProxy;
use support::postgres::PgCluster;
use support::scripted_adapter::ScriptedAdapter;

/// Short leases keep the takeover quick.
const LEASE_SECONDS: f64 = 2.0;
/// The statement that claims a reply for its send (`ledger_writes::mark_attempting`).
const CLAIM_SQL: &str = "SET state = 'attempting'";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_paused_between_claiming_a_reply_and_sending_it_sends_no_second_copy() {
    let rig = ClusterRig::start_proxied(2, LEASE_SECONDS, "").await;
    // Whichever instance runs the turn claims the reply; the first claim is trapped (the
    // other trap is dropped unsprung and never holds anything).
    let first = rig.proxy(0).trap(CLAIM_SQL);
    let second = rig.proxy(1).trap(CLAIM_SQL);
    assert_eq!(rig.post(0, 1, "answer me once").await, 200);
    let (paused, caught) = tokio::select! {
        caught = first.sprung(WAIT) => (0, caught),
        caught = second.sprung(WAIT) => (1, caught),
    };
    rig.signal(paused, "-STOP");
    caught.release();
    // The survivor takes the reply over once the paused instance's lease has expired.
    let sent = rig.wait_sent(1).await;
    assert!(sent[0].text.contains("answer me once"), "{sent:#?}");
    rig.signal(paused, "-CONT");
    let daemon = rig.instances[paused].daemon();
    wait_until(
        "the resumed instance gave the reply up (or sent it)",
        WAIT,
        || {
            rig.sent().len() > 1
                || daemon
                    .logs()
                    .iter()
                    .any(|l| l.contains("a held-back reply was not sent here"))
        },
    )
    .await;
    assert_eq!(rig.sent().len(), 1, "one copy: {:#?}", rig.sent());
    assert_eq!(
        rig.count("SELECT count(*) FROM delivery_obligations WHERE state = 'delivered'")
            .await,
        1
    );
    // The paused instance works on: a new message is answered once.
    assert_eq!(rig.post(paused, 2, "and this one").await, 200);
    let sent = rig.wait_sent(2).await;
    assert!(sent[1].text.contains("and this one"), "{sent:#?}");
    rig.stop().await;
}

/// The statement that stores a message (the model's tool calls, before they run).
const MESSAGE_SQL: &str = "INSERT INTO messages";

fn lines_in(path: &std::path::Path) -> usize {
    std::fs::read_to_string(path)
        .map(|text| text.lines().count())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_paused_before_running_a_tool_call_does_not_run_it_after_a_takeover() {
    let rig = ClusterRig::start_proxied(2, LEASE_SECONDS, "").await;
    let shared = tempfile::tempdir().unwrap();
    let file = shared.path().join("runs.txt");
    let append = || {
        Reply::tool_call(
            "terminal",
            serde_json::json!({"command": format!("echo ran >> {}", file.display())}),
        )
    };
    // The first holder's model call waits until the trap is armed; the holder that takes
    // the turn over runs the stored call (no mark says it started), then gets the answer.
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    rig.model.push(Step::Gated {
        reply: append(),
        gate: gate.clone(),
    });
    rig.model.push(Step::text("appended"));
    assert_eq!(rig.post(0, 1, "append a line").await, 200);
    rig.model.wait_for_requests(1, WAIT).await;
    // The user's message is stored; the next message stored is the model's tool call.
    let first = rig.proxy(0).trap(MESSAGE_SQL);
    let second = rig.proxy(1).trap(MESSAGE_SQL);
    gate.add_permits(1);
    let (paused, caught) = tokio::select! {
        caught = first.sprung(WAIT) => (0, caught),
        caught = second.sprung(WAIT) => (1, caught),
    };
    rig.signal(paused, "-STOP");
    caught.release();
    // The new holder's progress line comes first, then its answer.
    let mut seen = 1;
    loop {
        let sent = rig.wait_sent(seen).await;
        if sent.iter().any(|m| m.text == "appended") {
            break;
        }
        seen = sent.len() + 1;
    }
    assert_eq!(lines_in(&file), 1, "the new holder ran the command");
    rig.signal(paused, "-CONT");
    let daemon = rig.instances[paused].daemon();
    wait_until("the resumed holder refused its tool call", WAIT, || {
        lines_in(&file) > 1
            || daemon
                .logs()
                .iter()
                .any(|l| l.contains("tool call not run"))
    })
    .await;
    assert_eq!(
        lines_in(&file),
        1,
        "the paused holder ran the command again"
    );
    let texts: Vec<String> = rig.sent().into_iter().map(|m| m.text).collect();
    let count = |part: &str| texts.iter().filter(|t| t.contains(part)).count();
    assert_eq!(
        (count("terminal"), count("appended")),
        (1, 1),
        "one progress line and one answer: {texts:#?}"
    );
    rig.stop().await;
}

/// The instance lease of the store-level test: renewed every second.
const STORE_TTL: Duration = Duration::from_secs(3);

/// A reply owed to a Telegram DM: its id and its row.
async fn owe(store: &Store, content: &str) -> (String, hermesd::state::Obligation) {
    let id = store
        .create_obligation(NewObligation {
            session_key: "agent:main:telegram:dm:42".into(),
            message_ref: "e1".into(),
            platform: "telegram".into(),
            chat_id: "42".into(),
            thread_id: None,
            content: content.into(),
        })
        .await
        .unwrap();
    let row = store.get_obligation(&id).await.unwrap().unwrap();
    (id, row)
}

async fn obligation_row(pool: &PgPool, id: &str) -> (String, i64) {
    sqlx::query_as("SELECT state, attempts FROM delivery_obligations WHERE obligation_id = $1")
        .bind(id)
        .fetch_one(pool)
        .await
        .expect("read the obligation")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_owed_under_an_unconfirmed_instance_lease_stays_owed_and_goes_out_once_later() {
    let pg = tokio::task::spawn_blocking(PgCluster::start)
        .await
        .expect("start PostgreSQL");
    let proxy = PgProxy::start(pg.port()).await;
    let options = StoreOptions {
        instance_id: Some("a".into()),
        lease_ttl: STORE_TTL,
        ..StoreOptions::default()
    };
    let store = Store::open_postgres(&proxy.url_for(&pg.url(), pg.port()), options)
        .await
        .expect("open through the proxy");
    let direct = PgPool::connect(&pg.url()).await.expect("connect directly");
    let adapter = Arc::new(ScriptedAdapter::new(4096, LengthUnit::Utf16));
    let deliverer = Deliverer::new(adapter.clone(), RetryPolicy::seeded(2));
    let (id, row) = owe(&store, "owed").await;

    // The database stops answering this instance: no renewal lands, and the lease's local
    // deadline (never later than the database's expiry) passes.
    proxy.set_stalled(true);
    let trust = store.send_trust();
    wait_until("the lease's local deadline passed", WAIT, || {
        trust.may_act(Duration::ZERO).is_err()
    })
    .await;
    let delivered = tokio::time::timeout(WAIT, deliverer.deliver_obligation(&store, &row))
        .await
        .expect("a reply held back does not wait for the stalled database")
        .unwrap();
    let ObligationDelivery::Attempted(report) = delivered else {
        panic!("held back, not refused: {delivered:?}");
    };
    assert!(
        matches!(
            report.outcome,
            DeliveryOutcome::Fenced { after_chunk: 0, .. }
        ),
        "{report:?}"
    );
    assert!(adapter.sent().is_empty(), "nothing sent");
    assert_eq!(
        obligation_row(&direct, &id).await,
        ("pending".to_owned(), 0),
        "still owed, never claimed, never failed"
    );

    // The database answers again: a renewal lands and the reply goes out, once.
    proxy.set_stalled(false);
    wait_until("a renewal was confirmed", WAIT, || {
        trust.may_act(Duration::ZERO).is_ok()
    })
    .await;
    let delivered = deliverer.deliver_obligation(&store, &row).await.unwrap();
    assert!(
        matches!(&delivered, ObligationDelivery::Attempted(r) if r.outcome == DeliveryOutcome::Delivered),
        "{delivered:?}"
    );
    assert_eq!(adapter.sent().len(), 1);
    assert_eq!(obligation_row(&direct, &id).await.0, "delivered");
    store.close().await;
}

/// A platform that keeps a send waiting for three lease times (Discord's limiter queueing
/// behind a bucket other instances emptied) on an instance whose lease is renewed all along:
/// the reply is delivered, once, plain. Until the bound followed renewals, such a call was
/// cut off at the deadline it started with and the reply left ambiguous on a healthy
/// instance (the Discord reply `tests/cluster_chaos_e2e.rs` lost in CI).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_longer_than_the_lease_on_a_healthy_instance_is_delivered_once() {
    let pg = tokio::task::spawn_blocking(PgCluster::start)
        .await
        .expect("start PostgreSQL");
    let options = StoreOptions {
        instance_id: Some("a".into()),
        lease_ttl: STORE_TTL,
        ..StoreOptions::default()
    };
    let store = Store::open_postgres(&pg.url(), options)
        .await
        .expect("open PostgreSQL");
    let direct = PgPool::connect(&pg.url()).await.expect("connect directly");
    let adapter = Arc::new(ScriptedAdapter::new(4096, LengthUnit::Utf16));
    adapter.answer_after(
        STORE_TTL * 3,
        hermes_adapter::SendResult {
            message_id: Some("slow-1".into()),
            error: None,
            retry_after: None,
        },
    );
    let deliverer = Deliverer::new(adapter.clone(), RetryPolicy::seeded(3));
    let (id, row) = owe(&store, "worth the wait").await;
    let delivered = tokio::time::timeout(WAIT, deliverer.deliver_obligation(&store, &row))
        .await
        .expect("the slow send ends")
        .unwrap();
    let ObligationDelivery::Attempted(report) = delivered else {
        panic!("claimed and sent: {delivered:?}");
    };
    assert_eq!(report.outcome, DeliveryOutcome::Delivered, "{report:?}");
    assert_eq!(report.sent_message_ids, vec!["slow-1".to_owned()]);
    let texts = adapter.texts();
    assert_eq!(texts.len(), 1, "one send: {texts:?}");
    assert_eq!(texts[0].0, "worth the wait", "plain, no recovered marker");
    assert_eq!(obligation_row(&direct, &id).await.0, "delivered");
    store.close().await;
}
