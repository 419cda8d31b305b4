//! One owed reply, two instances on one PostgreSQL database, both waiting out a rate limit on
//! it: instance A's lease runs out during its wait and another holder takes A's id meanwhile
//! (so A must take a new token), instance B takes the reply over (A's claim is dead) and hits
//! a rate limit too. When the waits end, both try to take
//! the reply back for the retry; only the winner sends, so the user gets it exactly once.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use hermes_adapter::{LengthUnit, SendResult};
use hermesd::gateway::delivery::{Deliverer, Jitter, ObligationDelivery, RetryPolicy};
use hermesd::state::{NewObligation, ObligationState, Store, StoreOptions};
use support::owners::{PATIENCE, instance_lease};
use support::scripted_adapter::ScriptedAdapter;
use support::store_backends::{Backend, TestStore};

fn reply() -> NewObligation {
    NewObligation {
        session_key: "agent:main:telegram:dm:42".into(),
        message_ref: "e1".into(),
        platform: "telegram".into(),
        chat_id: "42".into(),
        thread_id: None,
        content: "owed once".into(),
    }
}

fn policy() -> RetryPolicy {
    RetryPolicy {
        jitter: Jitter::Fixed(Duration::ZERO),
        ..RetryPolicy::default()
    }
}

/// An instance with a short lease (renewed every second), so a lost lease is replaced fast.
async fn instance(t: &TestStore, id: &str) -> Store {
    let store = t
        .another(StoreOptions {
            instance_id: Some(id.to_owned()),
            lease_ttl: Duration::from_secs(3),
            ..StoreOptions::default()
        })
        .await;
    store.ensure_gateway_schema().await.expect("gateway schema");
    store
}

/// Waits (bounded) until the row is `pending` again after a claim: released for a wait.
async fn wait_released(store: &Store, id: &str) {
    let start = Instant::now();
    loop {
        let row = store.get_obligation(id).await.unwrap().unwrap();
        if row.state == ObligationState::Pending && row.last_error.is_some() {
            return;
        }
        assert!(
            start.elapsed() < PATIENCE,
            "the row was never released: {row:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_two_instances_taking_a_reply_back_after_a_rate_limit_exactly_one_sends() {
    let t = TestStore::open(Backend::Postgres).await;
    t.store.ensure_gateway_schema().await.unwrap();
    let pool = t.store.postgres().unwrap().pool().clone();
    let a = instance(&t, "a").await;
    let b = instance(&t, "b").await;
    let id = a.create_obligation(reply()).await.unwrap();
    let row = a.get_obligation(&id).await.unwrap().unwrap();

    // A's first send is refused for 12 s; it releases the row for the wait. (What follows
    // until B's claim takes about a second; the margin is for a loaded machine. Were B ever
    // that late, A would take the reply back unopposed and the check that B took it over
    // fails: the test never passes without the race it is about.)
    let adapter_a = Arc::new(ScriptedAdapter::new(4096, LengthUnit::Utf16));
    adapter_a.answer(SendResult::rate_limited(Duration::from_secs(12)));
    let deliverer_a = Deliverer::new(adapter_a.clone(), policy());
    let (store_a, row_a) = (a.clone(), row.clone());
    let sending_a =
        tokio::spawn(async move { deliverer_a.deliver_obligation(&store_a, &row_a).await });
    wait_released(&t.store, &id).await;

    // A's lease runs out during the wait (as if paused) and another holder takes and drops
    // A's id meanwhile: A takes a new token, so the claim stamped with the old one is dead
    // and B may take the reply over. (A lease that only ran out would be renewed late under
    // its token, and the claim would stay A's: tests/state_instances.rs.)
    let (old_token, _) = instance_lease(&pool, "a").await.unwrap();
    sqlx::query(
        "UPDATE hermesd_leases SET token = nextval('hermesd_lease_tokens'), expires_at = now() \
         WHERE scope = 'instance' AND key = 'a'",
    )
    .execute(&pool)
    .await
    .unwrap();
    let start = Instant::now();
    while !matches!(instance_lease(&pool, "a").await, Some((token, true)) if token != old_token) {
        assert!(start.elapsed() < PATIENCE, "A never took a new lease");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // B claims it, is refused for 1 s, and waits too.
    let adapter_b = Arc::new(ScriptedAdapter::new(4096, LengthUnit::Utf16));
    adapter_b.answer(SendResult::rate_limited(Duration::from_secs(1)));
    let deliverer_b = Deliverer::new(adapter_b.clone(), policy());
    let (store_b, row_b) = (b.clone(), row);
    let sending_b =
        tokio::spawn(async move { deliverer_b.deliver_obligation(&store_b, &row_b).await });

    let (done_a, done_b) = (sending_a.await.unwrap(), sending_b.await.unwrap());
    let delivered = |sent: &[(String, Option<String>, bool)]| sent.len().saturating_sub(1);
    let (texts_a, texts_b) = (adapter_a.texts(), adapter_b.texts());
    // Each adapter saw its refused first try; of the retries, exactly one went out.
    assert_eq!(
        delivered(&texts_a) + delivered(&texts_b),
        1,
        "A sent {texts_a:?} ({done_a:?}); B sent {texts_b:?} ({done_b:?})"
    );
    // B took the reply over during A's wait (A's claim was dead by then); this is what makes
    // A's taking it back a race, not a formality.
    assert!(
        matches!(done_b, Ok(ObligationDelivery::Attempted(_))),
        "{done_b:?}"
    );
    let row = t.store.get_obligation(&id).await.unwrap().unwrap();
    assert_eq!(row.state, ObligationState::Delivered);
    a.close().await;
    b.close().await;
    t.store.close().await;
}
