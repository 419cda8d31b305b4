//! The store's titles and lineage on both backends (a fresh state.db, and a fresh private
//! PostgreSQL cluster): unique sanitised titles numbered along a lineage, generated titles
//! that only fill an empty one, concurrent claims of one title, and walking ancestors and
//! descendants. The rest of the store's API is in `state_api.rs`.

mod support;

use hermesd::state::{NewSession, Store, StoreError};
use support::store_backends::TestStore;

on_both_backends!(
    titles_are_unique_sanitised_and_numbered_in_lineage,
    an_auto_title_only_fills_an_empty_title,
    a_compression_child_takes_its_ancestors_title,
    lineage_walks_ancestors_and_descendants,
    concurrent_claims_of_one_title_get_title_in_use,
);

async fn session(store: &Store, id: &str, source: &str) {
    store
        .create_session(NewSession::new(id, source))
        .await
        .expect("create session");
}

async fn titles_are_unique_sanitised_and_numbered_in_lineage(t: &TestStore) {
    let store = &t.store;
    for id in ["a", "b", "c"] {
        session(store, id, "cli").await;
    }
    store
        .set_session_title("a", Some("  Fix\u{200B} Docker   Build "))
        .await
        .unwrap();
    assert_eq!(
        store
            .get_session("a")
            .await
            .unwrap()
            .unwrap()
            .title
            .as_deref(),
        Some("Fix Docker Build")
    );
    let err = store
        .set_session_title("b", Some("Fix Docker Build"))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "title \"Fix Docker Build\" already belongs to session a"
    );
    let err = store
        .set_session_title("b", Some(&"x".repeat(101)))
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "Title too long (101 chars, max 100)");

    assert_eq!(
        store
            .next_title_in_lineage("Fix Docker Build")
            .await
            .unwrap(),
        "Fix Docker Build #2"
    );
    assert_eq!(store.next_title_in_lineage("Other").await.unwrap(), "Other");
    store
        .set_session_title("b", Some("Fix Docker Build #2"))
        .await
        .unwrap();
    assert_eq!(
        store
            .next_title_in_lineage("Fix Docker Build #2")
            .await
            .unwrap(),
        "Fix Docker Build #3"
    );
    assert_eq!(
        store
            .resolve_session_by_title("Fix Docker Build")
            .await
            .unwrap(),
        Some("b".into())
    );
    assert_eq!(store.resolve_session_by_title("nope").await.unwrap(), None);
    // A blank title clears it.
    store.set_session_title("b", Some("   ")).await.unwrap();
    assert_eq!(store.get_session("b").await.unwrap().unwrap().title, None);
}

async fn a_compression_child_takes_its_ancestors_title(t: &TestStore) {
    let store = &t.store;
    session(store, "parent", "cli").await;
    let mut child = NewSession::new("child", "cli");
    child.parent_session_id = Some("parent".into());
    store.create_session(child).await.unwrap();
    store
        .set_session_title("parent", Some("Plan"))
        .await
        .unwrap();
    store.end_session("parent", "compression").await.unwrap();
    store
        .set_session_title("child", Some("Plan"))
        .await
        .unwrap();
    assert_eq!(
        store.get_session("parent").await.unwrap().unwrap().title,
        None
    );
    assert_eq!(
        store
            .get_session("child")
            .await
            .unwrap()
            .unwrap()
            .title
            .as_deref(),
        Some("Plan")
    );
}

async fn lineage_walks_ancestors_and_descendants(t: &TestStore) {
    let store = &t.store;
    session(store, "root", "cli").await;
    for (id, parent) in [("mid", "root"), ("leaf", "mid"), ("sibling", "root")] {
        let mut s = NewSession::new(id, "cli");
        s.parent_session_id = Some(parent.into());
        store.create_session(s).await.unwrap();
    }
    let up: Vec<String> = store
        .ancestors("leaf")
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(up, ["leaf", "mid", "root"]);
    let mut down: Vec<String> = store
        .descendants("root")
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    down.sort();
    assert_eq!(down, ["leaf", "mid", "root", "sibling"]);
}

async fn an_auto_title_only_fills_an_empty_title(t: &TestStore) {
    let store = &t.store;
    for id in ["a", "b"] {
        session(store, id, "cli").await;
    }
    assert!(
        store
            .set_auto_title_if_empty("a", "Generated")
            .await
            .unwrap()
    );
    // A title set meanwhile (by hand, or an earlier generation) wins.
    assert!(!store.set_auto_title_if_empty("a", "Later").await.unwrap());
    assert!(!store.set_auto_title_if_empty("missing", "X").await.unwrap());
    let err = store
        .set_auto_title_if_empty("b", "Generated")
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::TitleInUse { title, holder } if title == "Generated" && holder == "a"),
        "{err}"
    );
    assert_eq!(store.get_session("b").await.unwrap().unwrap().title, None);
    assert!(matches!(
        store.set_session_title("missing", Some("Free")).await,
        Err(StoreError::SessionNotFound(id)) if id == "missing"
    ));
}

async fn concurrent_claims_of_one_title_get_title_in_use(t: &TestStore) {
    // Two handles, as two instances (or two processes) would have.
    let other = t.another(hermesd::state::StoreOptions::default()).await;
    let mut tasks = Vec::new();
    for i in 0..16 {
        let id = format!("s{i}");
        session(&t.store, &id, "cli").await;
        let store = if i % 2 == 0 {
            t.store.clone()
        } else {
            other.clone()
        };
        tasks.push(tokio::spawn(async move {
            store.set_session_title(&id, Some("Same")).await
        }));
    }
    let mut set = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(()) => set += 1,
            Err(StoreError::TitleInUse { title, .. }) => assert_eq!(title, "Same"),
            Err(other) => panic!("a lost race must be TitleInUse, not {other}"),
        }
    }
    assert_eq!(set, 1);
}
