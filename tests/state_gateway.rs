//! The gateway's durable tables, one suite run against state.db and PostgreSQL
//! (`on_both_backends!`): the inbound journal refuses duplicates across reopen and
//! processes/instances, answering an event records its reply atomically, replies left
//! behind by a dead owner come back (ambiguous ones flagged), and the routing index
//! round-trips. On state.db the tables exist only after `ensure_gateway_schema`.

mod support;

use std::collections::BTreeMap;

use hermesd::state::{
    GATEWAY_TABLES, InboundRecord, InboundState, NewObligation, OBLIGATION_MAX_ATTEMPTS,
    ObligationState, OwnerStamp, RECOVERED_MARKER, Store, StoreError, StoreOptions, now_epoch,
};
use rusqlite::Connection;
use serde_json::json;
use support::owners::{crash, doomed_owner};
use support::store_backends::{Backend, TestStore};

async fn open_gateway(path: &std::path::Path) -> Store {
    let store = Store::open(path).expect("open");
    store.ensure_gateway_schema().await.expect("gateway schema");
    store
}

/// `t`'s store, ready for the gateway.
async fn gateway(t: &TestStore) -> &Store {
    t.store
        .ensure_gateway_schema()
        .await
        .expect("gateway schema");
    &t.store
}

/// Another handle on `t`'s database, as another process or instance opens it.
async fn another(t: &TestStore) -> Store {
    let store = t.another(StoreOptions::default()).await;
    store.ensure_gateway_schema().await.expect("gateway schema");
    store
}

fn reply(event_id: &str, content: &str) -> NewObligation {
    NewObligation {
        session_key: "agent:main:telegram:dm:42".into(),
        message_ref: event_id.into(),
        platform: "telegram".into(),
        chat_id: "42".into(),
        thread_id: None,
        content: content.into(),
    }
}

fn tables(path: &std::path::Path) -> Vec<String> {
    let conn = Connection::open(path).unwrap();
    let mut stmt = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .unwrap();
    stmt.query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn gateway_tables_exist_only_after_ensure_and_keep_existing_tables_as_they_are() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    Store::open(&path).unwrap().close().await;
    let before = tables(&path);
    assert!(
        GATEWAY_TABLES
            .iter()
            .all(|t| !before.contains(&t.to_string()))
    );

    // A newer Hermes's delivery_obligations with an extra column must be left alone.
    Connection::open(&path)
        .unwrap()
        .execute_batch(
            "CREATE TABLE delivery_obligations (obligation_id TEXT PRIMARY KEY,
             session_key TEXT NOT NULL, platform TEXT NOT NULL, chat_id TEXT NOT NULL,
             thread_id TEXT, content TEXT NOT NULL, state TEXT NOT NULL,
             attempts INTEGER NOT NULL DEFAULT 0, created_at REAL NOT NULL,
             updated_at REAL NOT NULL, owner_pid INTEGER, owner_started_at INTEGER,
             last_error TEXT, future_column TEXT)",
        )
        .unwrap();
    let store = open_gateway(&path).await;
    store.ensure_gateway_schema().await.expect("idempotent");
    store.close().await;
    let after = tables(&path);
    assert!(
        GATEWAY_TABLES
            .iter()
            .all(|t| after.contains(&t.to_string()))
    );
    let conn = Connection::open(&path).unwrap();
    let future: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM pragma_table_info('delivery_obligations')
             WHERE name = 'future_column'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(future, 1, "an existing Hermes table is never altered");
}

async fn duplicate_inbound_events_are_refused_even_after_reopen(t: &TestStore) {
    let store = gateway(t).await;
    let payload = json!({"text": "hello", "user": {"id": 42}});
    let first = store.record_inbound("telegram", "u-1", "k", payload.clone());
    assert_eq!(first.await.unwrap(), InboundRecord::Recorded);
    let again = store.record_inbound("telegram", "u-1", "k", json!({"text": "other"}));
    assert_eq!(again.await.unwrap(), InboundRecord::Duplicate);
    // The same id on another platform is another event.
    let other = store.record_inbound("discord", "u-1", "k", json!({}));
    assert_eq!(other.await.unwrap(), InboundRecord::Recorded);
    assert!(
        store
            .mark_inbound("discord", "u-1", InboundState::Ignored)
            .await
            .unwrap()
    );
    assert!(
        !store
            .mark_inbound("slack", "nope", InboundState::Processing)
            .await
            .unwrap()
    );
    store.close().await;

    let store = another(t).await;
    let after_restart = store.record_inbound("telegram", "u-1", "k", json!({}));
    assert_eq!(after_restart.await.unwrap(), InboundRecord::Duplicate);
    let unfinished = store.unfinished_inbound().await.unwrap();
    assert_eq!(unfinished.len(), 1);
    assert_eq!(unfinished[0].payload, payload, "the first payload is kept");
    assert_eq!(unfinished[0].state, InboundState::Received);
    store
        .mark_inbound("telegram", "u-1", InboundState::Processing)
        .await
        .unwrap();
    assert_eq!(
        store.unfinished_inbound().await.unwrap()[0].state,
        InboundState::Processing
    );
    // The per-session question a cluster asks before taking a lease.
    assert!(store.has_unfinished_inbound("k").await.unwrap());
    assert!(!store.has_unfinished_inbound("other-key").await.unwrap());
    store
        .mark_inbound("telegram", "u-1", InboundState::Answered)
        .await
        .unwrap();
    assert!(!store.has_unfinished_inbound("k").await.unwrap());
    store.close().await;
}

async fn answering_records_the_reply_and_the_answer_together(t: &TestStore) {
    let store = gateway(t).await;
    let err = store
        .answer_inbound("telegram", "never-seen", vec![reply("never-seen", "hi")])
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::InboundNotFound { .. }), "{err:?}");
    let orphan = reply("never-seen", "hi").obligation_id();
    assert_eq!(
        store.get_obligation(&orphan).await.unwrap(),
        None,
        "nothing recorded"
    );

    store
        .record_inbound("telegram", "e1", "k", json!({}))
        .await
        .unwrap();
    store
        .mark_inbound("telegram", "e1", InboundState::Processing)
        .await
        .unwrap();
    let replies = vec![reply("e1", "part one"), reply("e1", "part two")];
    let ids = store
        .answer_inbound("telegram", "e1", replies)
        .await
        .unwrap();
    assert_eq!(ids.len(), 2);
    assert_eq!(ids[0].len(), 24);
    let event = store.get_inbound("telegram", "e1").await.unwrap().unwrap();
    assert_eq!(event.state, InboundState::Answered);
    assert_eq!(event.reply_obligation_ids, ids);
    assert!(store.unfinished_inbound().await.unwrap().is_empty());
    for id in &ids {
        let o = store.get_obligation(id).await.unwrap().expect("obligation");
        assert_eq!((o.state, o.attempts), (ObligationState::Pending, 0));
        assert_eq!(o.owner_pid, Some(i64::from(std::process::id())));
    }
    // Ours and alive: not for recovery.
    assert!(store.undelivered(now_epoch()).await.unwrap().is_empty());
    assert!(store.mark_attempting(&ids[0]).await.unwrap());
    assert!(store.mark_delivered(&ids[0]).await.unwrap());
    assert!(
        !store.mark_attempting(&ids[0]).await.unwrap(),
        "delivered stays delivered"
    );
    // Re-recording the same turn and content keeps the delivered row.
    store
        .create_obligation(reply("e1", "part one"))
        .await
        .unwrap();
    let o = store.get_obligation(&ids[0]).await.unwrap().unwrap();
    assert_eq!(o.state, ObligationState::Delivered);
    store.close().await;
}

async fn replies_left_by_a_dead_owner_are_returned_and_ambiguous_ones_flagged(t: &TestStore) {
    let crashed = doomed_owner(t, "crashed").await;
    crashed.ensure_gateway_schema().await.unwrap();
    let never_sent = crashed
        .create_obligation(reply("e1", "never sent"))
        .await
        .unwrap();
    let mid_send = crashed
        .create_obligation(reply("e2", "mid send"))
        .await
        .unwrap();
    let rejected = crashed
        .create_obligation(reply("e3", "rejected"))
        .await
        .unwrap();
    let done = crashed
        .create_obligation(reply("e4", "done"))
        .await
        .unwrap();
    crashed.mark_attempting(&mid_send).await.unwrap();
    crashed.mark_attempting(&rejected).await.unwrap();
    crashed
        .mark_failed(&rejected, "400 chat not found")
        .await
        .unwrap();
    crashed.mark_attempting(&done).await.unwrap();
    crashed.mark_delivered(&done).await.unwrap();
    crash(t, crashed).await;

    let store = gateway(t).await;
    let now = now_epoch();
    let found = store.undelivered(now).await.unwrap();
    let ids: Vec<&str> = found.iter().map(|o| o.obligation_id.as_str()).collect();
    assert_eq!(ids, [&never_sent, &mid_send, &rejected]);
    assert!(!found[0].ambiguous);
    assert_eq!(found[0].text_to_send(), "never sent");
    assert!(found[1].ambiguous && found[2].ambiguous);
    assert_eq!(
        found[1].text_to_send(),
        format!("{RECOVERED_MARKER}mid send")
    );
    assert_eq!(found[2].last_error.as_deref(), Some("400 chat not found"));

    // Claiming makes the row ours: no longer returned while we live.
    assert!(store.mark_attempting(&mid_send).await.unwrap());
    let claimed = store.get_obligation(&mid_send).await.unwrap().unwrap();
    assert_eq!(claimed.attempts, 2);
    let left = store.undelivered(now).await.unwrap();
    assert_eq!(left.len(), 2);
    assert!(left.iter().all(|o| o.obligation_id != mid_send));
    store.close().await;
}

async fn stale_and_exhausted_rows_of_dead_owners_are_abandoned(t: &TestStore) {
    let crashed = doomed_owner(t, "crashed").await;
    crashed.ensure_gateway_schema().await.unwrap();
    let exhausted = crashed
        .create_obligation(reply("e1", "poison"))
        .await
        .unwrap();
    for _ in 0..OBLIGATION_MAX_ATTEMPTS {
        crashed.mark_attempting(&exhausted).await.unwrap();
    }
    let old = crashed.create_obligation(reply("e2", "old")).await.unwrap();
    crash(t, crashed).await;

    let store = gateway(t).await;
    let mine = store
        .create_obligation(reply("e3", "live owner"))
        .await
        .unwrap();
    let now = now_epoch();
    let found = store.undelivered(now).await.unwrap();
    assert_eq!(found.len(), 1, "over the attempt cap is not resent");
    assert_eq!(found[0].obligation_id, old);
    assert_eq!(store.abandon_stale(now).await.unwrap(), 1);
    let a_day_later = now + 86_400.0 + 60.0;
    assert!(store.undelivered(a_day_later).await.unwrap().is_empty());
    assert_eq!(store.abandon_stale(a_day_later).await.unwrap(), 1);
    for (id, state) in [
        (&exhausted, ObligationState::Abandoned),
        (&old, ObligationState::Abandoned),
        (&mine, ObligationState::Pending),
    ] {
        assert_eq!(
            store.get_obligation(id).await.unwrap().unwrap().state,
            state
        );
    }
    store.close().await;
}

async fn two_stores_on_one_database_see_each_others_records(t: &TestStore) {
    let a = gateway(t).await;
    let b = another(t).await;
    let first = a.record_inbound("slack", "T1.001", "k", json!({"n": 1}));
    assert_eq!(first.await.unwrap(), InboundRecord::Recorded);
    let second = b.record_inbound("slack", "T1.001", "k", json!({"n": 2}));
    assert_eq!(second.await.unwrap(), InboundRecord::Duplicate);
    assert_eq!(
        b.unfinished_inbound().await.unwrap()[0].payload,
        json!({"n": 1})
    );
    let id = b
        .create_obligation(reply("T1.001", "answer"))
        .await
        .unwrap();
    assert!(a.get_obligation(&id).await.unwrap().is_some());
    b.save_routing_entry("/s", "k", &json!({"session_id": "x"}))
        .await
        .unwrap();
    assert_eq!(a.load_routing("/s").await.unwrap()["k"]["session_id"], "x");
    a.close().await;
    b.close().await;
}

async fn routing_entries_save_load_replace_and_delete_per_scope(t: &TestStore) {
    let store = gateway(t).await;
    let entry = |id: &str| json!({"session_key": "k", "session_id": id, "chat_type": "dm"});
    store
        .save_routing_entry("/a", "k1", &entry("s1"))
        .await
        .unwrap();
    store
        .save_routing_entry("/a", "k1", &entry("s2"))
        .await
        .unwrap();
    store
        .save_routing_entry("/a", "k2", &entry("s3"))
        .await
        .unwrap();
    store
        .save_routing_entry("/b", "k1", &entry("other"))
        .await
        .unwrap();
    store
        .save_routing_entry("/a", "", &entry("ignored"))
        .await
        .unwrap();
    let a = store.load_routing("/a").await.unwrap();
    assert_eq!(a.len(), 2);
    assert_eq!(a["k1"], entry("s2"), "a save overwrites");

    let replacement = BTreeMap::from([("k3".to_owned(), entry("s4"))]);
    store.replace_routing("/a", &replacement).await.unwrap();
    assert_eq!(store.load_routing("/a").await.unwrap(), replacement);
    assert_eq!(
        store.load_routing("/b").await.unwrap()["k1"],
        entry("other")
    );
    assert!(store.delete_routing_entry("/b", "k1").await.unwrap());
    assert!(!store.delete_routing_entry("/b", "k1").await.unwrap());
    assert!(store.load_routing("/b").await.unwrap().is_empty());
    store.close().await;
}

async fn finished_inbound_events_are_pruned_and_unfinished_kept(t: &TestStore) {
    let store = gateway(t).await;
    for id in ["done", "skip", "open"] {
        store
            .record_inbound("api", id, "k", json!({}))
            .await
            .unwrap();
    }
    store.answer_inbound("api", "done", vec![]).await.unwrap();
    store
        .mark_inbound("api", "skip", InboundState::Ignored)
        .await
        .unwrap();
    assert_eq!(store.prune_inbound(1.0).await.unwrap(), 0, "too recent");
    assert_eq!(store.prune_inbound(-1.0).await.unwrap(), 2);
    assert!(store.get_inbound("api", "done").await.unwrap().is_none());
    assert_eq!(
        store.unfinished_inbound().await.unwrap()[0].event_id,
        "open"
    );
    store.close().await;
}

/// Issue 28, defect 2: the ledger cap once deleted owed rows (pending ones sorted last, but
/// deleted all the same) on every reply, so an outage with more than 500 owed replies lost
/// some. Owed rows are now never pruned; only finished rows are capped, and only when the
/// janitor prunes, never as a side effect of recording a reply.
async fn owed_replies_are_never_pruned_and_only_finished_rows_are_capped(t: &TestStore) {
    let store = gateway(t).await;
    let owed = usize::try_from(hermesd::state::OBLIGATION_MAX_ROWS).unwrap() + 12;
    let mut ids = Vec::with_capacity(owed);
    for n in 0..owed {
        let id = store
            .create_obligation(reply(&format!("e{n}"), &format!("reply {n}")))
            .await
            .unwrap();
        ids.push(id);
    }
    assert_eq!(store.owed_replies().await.unwrap(), owed as u64);
    assert!(
        store.get_obligation(&ids[0]).await.unwrap().is_some(),
        "the oldest owed reply was deleted by the cap"
    );
    assert_eq!(
        store.prune_ledger().await.unwrap(),
        0,
        "owed rows are never pruned"
    );
    assert_eq!(store.owed_replies().await.unwrap(), owed as u64);

    for id in &ids {
        assert!(store.mark_delivered(id).await.unwrap());
    }
    assert_eq!(store.owed_replies().await.unwrap(), 0);
    assert_eq!(
        store.prune_ledger().await.unwrap(),
        12,
        "finished rows past the cap go"
    );
    assert!(
        store
            .get_obligation(&ids[owed - 1])
            .await
            .unwrap()
            .is_some()
    );
    store.close().await;
}

on_both_backends!(
    owed_replies_are_never_pruned_and_only_finished_rows_are_capped,
    duplicate_inbound_events_are_refused_even_after_reopen,
    answering_records_the_reply_and_the_answer_together,
    replies_left_by_a_dead_owner_are_returned_and_ambiguous_ones_flagged,
    stale_and_exhausted_rows_of_dead_owners_are_abandoned,
    two_stores_on_one_database_see_each_others_records,
    routing_entries_save_load_replace_and_delete_per_scope,
    finished_inbound_events_are_pruned_and_unfinished_kept,
);

async fn a_reply_delivered_by_editing_names_its_message(t: &TestStore) {
    let store = gateway(t).await;
    store
        .record_inbound("telegram", "e1", "k", json!({}))
        .await
        .unwrap();
    let id = store
        .answer_inbound_by_edit("telegram", "e1", reply("e1", "streamed"), "m-77")
        .await
        .unwrap();
    assert_eq!(
        store.reply_edit_target(&id).await.unwrap().as_deref(),
        Some("m-77")
    );
    let event = store.get_inbound("telegram", "e1").await.unwrap().unwrap();
    assert_eq!(event.state, InboundState::Answered);
    assert_eq!(event.reply_obligation_ids, vec![id.clone()]);
    let plain = store.create_obligation(reply("e2", "plain")).await.unwrap();
    assert_eq!(store.reply_edit_target(&plain).await.unwrap(), None);

    let err = store
        .answer_inbound_by_edit("telegram", "nope", reply("nope", "x"), "m-1")
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::InboundNotFound { .. }), "{err:?}");
    let orphan = reply("nope", "x").obligation_id();
    assert_eq!(store.reply_edit_target(&orphan).await.unwrap(), None);
    assert_eq!(store.get_obligation(&orphan).await.unwrap(), None);
    store.close().await;
}

async fn a_deferred_send_returns_to_pending_without_counting_the_attempt(t: &TestStore) {
    let store = gateway(t).await;
    let id = store.create_obligation(reply("e1", "later")).await.unwrap();
    let row = |store: &Store| {
        let (store, id) = (store.clone(), id.clone());
        async move { store.get_obligation(&id).await.unwrap().unwrap() }
    };
    assert!(
        !store.mark_deferred(&id, "429").await.unwrap(),
        "only a send under way is deferred"
    );
    assert!(store.mark_attempting(&id).await.unwrap());
    assert!(store.mark_deferred(&id, "flood wait 30 s").await.unwrap());
    let o = row(store).await;
    assert_eq!((o.state, o.attempts), (ObligationState::Pending, 0));
    assert_eq!(o.last_error.as_deref(), Some("flood wait 30 s"));

    assert!(store.mark_attempting(&id).await.unwrap());
    assert!(store.mark_failed(&id, &"x".repeat(600)).await.unwrap());
    let o = row(store).await;
    assert_eq!((o.state, o.attempts), (ObligationState::Failed, 1));
    assert_eq!(
        o.last_error.map(|e| e.len()),
        Some(500),
        "errors are clipped"
    );
    assert!(!store.mark_deferred(&id, "429").await.unwrap());

    assert!(store.mark_attempting(&id).await.unwrap());
    assert!(store.mark_delivered(&id).await.unwrap());
    assert!(!store.mark_failed(&id, "late").await.unwrap());
    assert!(!store.mark_deferred(&id, "late").await.unwrap());
    let o = row(store).await;
    assert_eq!((o.state, o.attempts), (ObligationState::Delivered, 2));
    assert_eq!(o.last_error, None);
    store.close().await;
}

/// Another live owner on `t`'s database: on PostgreSQL another instance (its own lease); on
/// state.db another running process (this test's parent, which outlives the test).
async fn live_rival(t: &TestStore) -> Store {
    let ledger_owner = match t.backend {
        Backend::Postgres => OwnerStamp::current(),
        Backend::Sqlite => OwnerStamp {
            pid: i64::from(std::os::unix::process::parent_id()),
            started_at: None,
        },
    };
    assert!(ledger_owner.is_alive());
    let store = t
        .another(StoreOptions {
            ledger_owner,
            ..StoreOptions::default()
        })
        .await;
    store.ensure_gateway_schema().await.expect("gateway schema");
    store
}

async fn a_deferral_resets_only_a_send_this_owner_holds_or_a_dead_one_held(t: &TestStore) {
    let store = gateway(t).await;
    let rival = live_rival(t).await;
    let state = |id: &str| {
        let (store, id) = (store.clone(), id.to_owned());
        async move {
            let o = store.get_obligation(&id).await.unwrap().unwrap();
            (o.state, o.attempts)
        }
    };
    // The rival is sending its reply right now: not ours to put back to `pending`.
    let theirs = rival
        .create_obligation(reply("e1", "the rival's"))
        .await
        .unwrap();
    assert!(rival.mark_attempting(&theirs).await.unwrap());
    assert!(!store.mark_deferred(&theirs, "429").await.unwrap());
    assert_eq!(state(&theirs).await, (ObligationState::Attempting, 1));
    assert!(rival.mark_deferred(&theirs, "429").await.unwrap());
    assert_eq!(state(&theirs).await, (ObligationState::Pending, 0));

    // A send whose owner died may be deferred by anyone (nobody is making it any more).
    let crashed = doomed_owner(t, "crashed").await;
    crashed.ensure_gateway_schema().await.unwrap();
    let orphan = crashed
        .create_obligation(reply("e2", "the dead owner's"))
        .await
        .unwrap();
    assert!(crashed.mark_attempting(&orphan).await.unwrap());
    crash(t, crashed).await;
    assert!(store.mark_deferred(&orphan, "429").await.unwrap());
    assert_eq!(state(&orphan).await, (ObligationState::Pending, 0));
    rival.close().await;
    store.close().await;
}

on_both_backends!(
    a_reply_delivered_by_editing_names_its_message,
    a_deferred_send_returns_to_pending_without_counting_the_attempt,
    a_deferral_resets_only_a_send_this_owner_holds_or_a_dead_one_held,
);
