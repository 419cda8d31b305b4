//! The gateway tables shared with the real Python Hermes 0.19.0: its `SessionDB` still opens
//! and migrates a database after `ensure_gateway_schema`, both read each other's routing
//! entries, and its delivery ledger recovers the obligations a dead hermesd left behind (and
//! agrees on the obligation id).

mod support;

use hermesd::state::{NewObligation, Store, now_epoch};
use serde_json::json;

const PY_GATEWAY: &str = r#"
import json, pathlib, sys
import hermes_state
from gateway import delivery_ledger
path, scope = pathlib.Path(sys.argv[1]), sys.argv[2]
db = hermes_state.SessionDB(db_path=path)
version = db._conn.execute("SELECT version FROM schema_version").fetchone()[0]
ours = db.load_gateway_routing_entries(scope=scope)
db.save_gateway_routing_entry(
    "agent:main:discord:dm:7",
    json.dumps({"session_key": "agent:main:discord:dm:7", "session_id": "py-session"}),
    scope=scope,
)
db.close()
claimed = delivery_ledger.sweep_recoverable()
print(json.dumps({
    "version": version,
    "routing": {k: json.loads(v) for k, v in ours.items()},
    "claimed": sorted(claimed, key=lambda c: c["content"]),
    "id": delivery_ledger.compute_obligation_id("agent:main:telegram:dm:42", "m-1", "héllo ✓"),
}))
"#;

fn reply(event_id: &str, content: &str) -> NewObligation {
    NewObligation {
        session_key: "agent:main:telegram:dm:42".into(),
        message_ref: event_id.into(),
        platform: "telegram".into(),
        chat_id: "42".into(),
        thread_id: Some("9".into()),
        content: content.into(),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn python_hermes_shares_the_routing_index_and_recovers_our_obligations() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let scope = dir.path().join("sessions").display().to_string();
    let crashed = support::store_owned_by(&path, support::dead_owner());
    crashed.ensure_gateway_schema().await.unwrap();
    let entry = json!({"session_key": "agent:main:telegram:dm:42", "session_id": "rs-session",
                       "platform": "telegram", "chat_type": "dm"});
    crashed
        .save_routing_entry(&scope, "agent:main:telegram:dm:42", &entry)
        .await
        .unwrap();
    let pending = crashed.create_obligation(reply("m-1", "a")).await.unwrap();
    let attempting = crashed.create_obligation(reply("m-2", "b")).await.unwrap();
    crashed.mark_attempting(&attempting).await.unwrap();
    let delivered = crashed.create_obligation(reply("m-3", "c")).await.unwrap();
    crashed.mark_delivered(&delivered).await.unwrap();
    crashed.close().await;

    let py = support::python::run(
        PY_GATEWAY,
        &[path.to_str().unwrap(), &scope],
        dir.path(),
        "",
    );
    assert_eq!(
        py["version"], 22,
        "Python migrated the file with our tables in it"
    );
    assert_eq!(py["routing"]["agent:main:telegram:dm:42"], entry);
    assert_eq!(
        py["id"],
        reply("m-1", "héllo ✓").obligation_id(),
        "same obligation id as delivery_ledger.compute_obligation_id"
    );
    let claimed = py["claimed"].as_array().unwrap();
    assert_eq!(
        claimed.len(),
        2,
        "pending and attempting, not delivered: {claimed:?}"
    );
    assert_eq!(claimed[0]["obligation_id"], pending.as_str());
    assert_eq!(claimed[0]["needs_marker"], false);
    assert_eq!(claimed[0]["thread_id"], "9");
    assert_eq!(claimed[1]["obligation_id"], attempting.as_str());
    assert_eq!(claimed[1]["needs_marker"], true);
    assert_eq!(claimed[1]["attempts"], 2);

    // Back in hermesd on the migrated file: Python's entry is there, and the rows Python
    // claimed (its process has exited) are ours to recover.
    let store = Store::open(&path).unwrap();
    store.ensure_gateway_schema().await.unwrap();
    let routing = store.load_routing(&scope).await.unwrap();
    assert_eq!(routing.len(), 2);
    assert_eq!(
        routing["agent:main:discord:dm:7"]["session_id"],
        "py-session"
    );
    let found = store.undelivered(now_epoch()).await.unwrap();
    let ids: Vec<&str> = found.iter().map(|o| o.obligation_id.as_str()).collect();
    assert_eq!(ids, [pending.as_str(), attempting.as_str()]);
    assert_eq!(found[1].attempts, 2);
    assert!(found[1].ambiguous);
    store.close().await;
}
