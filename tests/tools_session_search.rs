//! session_search against a real state.db: discovery with one result per lineage and the
//! anchored window, title matches, hidden and current sessions, scroll (with rebinding into
//! a compressed child), read and browse.

use hermesd::state::{NewMessage, NewSession, Store};
use hermesd::tools::session_search::{SessionSearchArgs, session_search};
use serde_json::{Value, json};

async fn fixture() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("state.db")).unwrap();
    let mut child = NewSession::new("deploy-2", "telegram");
    child.parent_session_id = Some("deploy-1".into());
    for session in [
        NewSession::new("deploy-1", "telegram"),
        child,
        NewSession::new("cron-1", "cron"),
        NewSession::new("sub-1", "subagent"),
        NewSession::new("current", "cli"),
    ] {
        store.create_session(session).await.unwrap();
    }
    store
        .set_session_title("deploy-1", Some("Kubernetes rollout"))
        .await
        .unwrap();
    let rows = [
        ("deploy-1", "user", "Please fix the kubernetes deployment"),
        ("deploy-1", "assistant", "Looking at the manifests now"),
        ("deploy-1", "tool", "kubectl output kubernetes"),
        (
            "deploy-1",
            "assistant",
            "The kubernetes probe was wrong; fixed",
        ),
        ("deploy-1", "user", "thanks!"),
        ("deploy-2", "user", "kubernetes again after compression"),
        ("cron-1", "assistant", "nightly kubernetes report"),
        ("sub-1", "assistant", "subagent kubernetes notes"),
        ("current", "user", "what did we do about kubernetes?"),
    ];
    for (session, role, text) in rows {
        store
            .append_message(NewMessage::text(session, role, text))
            .await
            .unwrap();
    }
    (dir, store)
}

async fn search(store: &Store, args: Value) -> Value {
    let args = SessionSearchArgs::from_json(&args);
    serde_json::from_str(&session_search(store, &args, Some("current")).await).unwrap()
}

#[tokio::test]
async fn discovery_returns_one_result_per_lineage_with_context() {
    let (_dir, store) = fixture().await;
    let found = search(&store, json!({"query": "kubernetes", "limit": 5})).await;
    assert_eq!(found["success"], true);
    assert_eq!(found["mode"], "discover");
    let ids: Vec<&str> = found["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["session_id"].as_str().unwrap())
        .collect();
    // deploy-1 and its compressed child deploy-2 are one lineage (one result); cron is
    // demoted below it; subagent and the current session are never shown.
    assert_eq!(ids, ["deploy-2", "cron-1"], "{found}");
    assert_eq!(found["results"][0]["parent_session_id"], "deploy-1");
    assert_eq!(found["results"][0]["title"], "Kubernetes rollout");
    // A query naming a session title puts that session first.
    let titled = search(&store, json!({"query": "'Kubernetes rollout'"})).await;
    let title_hit = &titled["results"][0];
    assert_eq!(title_hit["matched_role"], "session_title");
    assert_eq!(
        title_hit["snippet"],
        "Session title matched: Kubernetes rollout"
    );
    assert_eq!(title_hit["session_id"], "deploy-1");
    assert_eq!(title_hit["messages"][0]["anchor"], true);
    let plain = search(&store, json!({"query": "probe"})).await;
    let hit = &plain["results"][0];
    assert_eq!(hit["session_id"], "deploy-1");
    assert_eq!(hit["matched_role"], "assistant");
    assert!(hit["snippet"].as_str().unwrap().contains(">>>probe<<<"));
    let window: Vec<&str> = hit["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        window,
        ["user", "assistant", "assistant", "user"],
        "tool rows are dropped from the window"
    );
    let anchor: Vec<&Value> = hit["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["anchor"] == true)
        .collect();
    assert_eq!(anchor.len(), 1);
    assert_eq!(
        anchor[0]["content"],
        "The kubernetes probe was wrong; fixed"
    );
    let none = search(&store, json!({"query": "nonexistentword"})).await;
    assert_eq!(none["message"], "No matching sessions found.");
    let tools = search(&store, json!({"query": "kubectl", "role_filter": "tool"})).await;
    assert_eq!(tools["results"][0]["matched_role"], "tool");
}

#[tokio::test]
async fn scroll_read_and_browse() {
    let (_dir, store) = fixture().await;
    let messages = store.get_messages("deploy-1").await.unwrap();
    let third = messages[2].id;
    let scrolled = search(
        &store,
        json!({"session_id": "deploy-1", "around_message_id": third, "window": 1}),
    )
    .await;
    assert_eq!(scrolled["mode"], "scroll");
    assert_eq!(scrolled["messages"].as_array().unwrap().len(), 3);
    assert_eq!(scrolled["messages_before"], 1);
    assert_eq!(scrolled["messages_after"], 1);
    let child_message = store.get_messages("deploy-2").await.unwrap()[0].id;
    let rebound = search(
        &store,
        json!({"session_id": "deploy-1", "around_message_id": child_message}),
    )
    .await;
    assert_eq!(rebound["session_id"], "deploy-2");
    assert!(
        rebound["warning"]
            .as_str()
            .unwrap()
            .contains("rebound transparently")
    );
    let own = search(
        &store,
        json!({"session_id": "current", "around_message_id": 1}),
    )
    .await;
    assert!(
        own["error"]
            .as_str()
            .unwrap()
            .starts_with("not scrolled: that message belongs to this conversation")
    );
    let read = search(&store, json!({"session_id": "deploy-1"})).await;
    assert_eq!(read["mode"], "read");
    assert_eq!(read["message_count"], 5);
    assert_eq!(read["truncated"], false);
    let missing = search(&store, json!({"session_id": "nope"})).await;
    assert_eq!(
        missing,
        json!({"error": "session_id not found: nope", "success": false})
    );
    let browse = search(&store, json!({})).await;
    let listed: Vec<&str> = browse["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["session_id"].as_str().unwrap())
        .collect();
    assert!(listed.contains(&"deploy-1") && listed.contains(&"cron-1"));
    assert!(
        !listed.contains(&"deploy-2") && !listed.contains(&"sub-1") && !listed.contains(&"current")
    );
    let other_profile = search(&store, json!({"session_id": "work/deploy-1"})).await;
    assert!(
        other_profile["error"]
            .as_str()
            .unwrap()
            .starts_with("profile 'work'")
    );
    let same_profile = search(&store, json!({"session_id": "default/deploy-1"})).await;
    assert_eq!(same_profile["mode"], "read");
}
