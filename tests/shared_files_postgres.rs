//! Pairing and the agent's memory shared by instances on one PostgreSQL (issue 22: "pairing
//! approvals ... and the agent's memory live in PostgreSQL in this mode, so instances need
//! no shared filesystem"). Each "instance" here is a separate home with its own connection
//! thread (`SharedFiles::open`), as separate processes would be.

mod support;

use std::sync::Arc;

use hermesd::gateway::pairing::{MAX_PENDING_PER_PLATFORM, PairingRequest, PairingStore};
use hermesd::home::HermesHome;
use hermesd::state::postgres::SharedFiles;
use hermesd::tools::memory::{MemoryStore, Target};
use support::postgres::PgCluster;

const NOW: f64 = 1_800_000_000.0;

fn instance(cluster: &PgCluster) -> (tempfile::TempDir, HermesHome, SharedFiles) {
    let dir = tempfile::tempdir().unwrap();
    let home = HermesHome::at(dir.path());
    let shared = SharedFiles::open(&cluster.url()).expect("open the shared files");
    (dir, home, shared)
}

fn issued(request: PairingRequest) -> String {
    match request {
        PairingRequest::Issued(code) => code.as_str().to_owned(),
        other => panic!("expected a code, got {other:?}"),
    }
}

#[test]
fn a_code_issued_by_one_instance_is_approved_on_another_and_counts_everywhere() {
    let cluster = PgCluster::start();
    let (_a_dir, a_home, a_shared) = instance(&cluster);
    let (_b_dir, b_home, b_shared) = instance(&cluster);
    let a = PairingStore::open_shared(&a_home, a_shared).unwrap();
    let b = PairingStore::open_shared(&b_home, b_shared).unwrap();

    let code = issued(a.request_code("telegram", "4242", "ada", NOW).unwrap());
    assert!(!a.is_approved("telegram", "4242"));
    assert!(!b.is_approved("telegram", "4242"));
    // The same user asking the other instance within the window is rate limited there too.
    assert_eq!(
        b.request_code("telegram", "4242", "ada", NOW + 1.0)
            .unwrap(),
        PairingRequest::RateLimited
    );

    let approved = b.approve("telegram", &code, NOW + 2.0).unwrap();
    assert_eq!(approved.user_id, "4242");
    assert!(
        a.is_approved("telegram", "4242"),
        "A sees B's approval at once"
    );
    assert!(b.is_approved("telegram", "4242"));
    assert_eq!(a.list_approved(None).unwrap().len(), 1);

    assert!(a.revoke("telegram", "4242").unwrap());
    assert!(
        !b.is_approved("telegram", "4242"),
        "B sees A's revocation at once"
    );
    // Nothing was written to either home's pairing directory.
    for home in [&a_home, &b_home] {
        let dir = home.path().join("platforms/pairing");
        let files: Vec<_> = std::fs::read_dir(&dir)
            .map(|d| d.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert!(files.is_empty(), "{}: {files:?}", dir.display());
    }
}

#[test]
fn the_pending_cap_holds_across_instances_asking_at_once() {
    let cluster = PgCluster::start();
    let stores: Vec<(tempfile::TempDir, Arc<PairingStore>)> = (0..3)
        .map(|_| {
            let (dir, home, shared) = instance(&cluster);
            (
                dir,
                Arc::new(PairingStore::open_shared(&home, shared).unwrap()),
            )
        })
        .collect();
    let threads: Vec<_> = (0..12)
        .map(|user| {
            let store = Arc::clone(&stores[user % stores.len()].1);
            std::thread::spawn(move || {
                store
                    .request_code("discord", &format!("user-{user}"), "someone", NOW)
                    .unwrap()
            })
        })
        .collect();
    let outcomes: Vec<PairingRequest> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let issued = outcomes
        .iter()
        .filter(|o| matches!(o, PairingRequest::Issued(_)))
        .count();
    assert_eq!(issued, MAX_PENDING_PER_PLATFORM, "{outcomes:?}");
    assert_eq!(
        stores[0]
            .1
            .list_pending(Some("discord"), NOW)
            .unwrap()
            .len(),
        MAX_PENDING_PER_PLATFORM
    );
}

#[test]
fn the_first_instance_seeds_the_shared_copies_from_its_home_and_later_ones_do_not_overwrite() {
    let cluster = PgCluster::start();
    let (_a_dir, a_home, a_shared) = instance(&cluster);
    let seeded = a_home.path().join("platforms/pairing");
    std::fs::create_dir_all(&seeded).unwrap();
    std::fs::write(
        seeded.join("slack-approved.json"),
        r#"{"U01": {"user_name": "grace", "approved_at": 1700000000.0}}"#,
    )
    .unwrap();
    let a = PairingStore::open_shared(&a_home, a_shared).unwrap();
    assert!(a.is_approved("slack", "U01"));

    let (_b_dir, b_home, b_shared) = instance(&cluster);
    let other = b_home.path().join("platforms/pairing");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(
        other.join("slack-approved.json"),
        r#"{"U99": {"user_name": "mallory", "approved_at": 1.0}}"#,
    )
    .unwrap();
    let b = PairingStore::open_shared(&b_home, b_shared).unwrap();
    assert!(b.is_approved("slack", "U01"));
    assert!(
        !b.is_approved("slack", "U99"),
        "a later home's files never replace the shared copies"
    );
}

#[test]
fn memory_written_on_one_instance_is_read_and_kept_by_another() {
    let cluster = PgCluster::start();
    let (_a_dir, a_home, a_shared) = instance(&cluster);
    std::fs::create_dir_all(a_home.path().join("memories")).unwrap();
    std::fs::write(
        a_home.path().join("memories/USER.md"),
        "prefers metric units",
    )
    .unwrap();
    let a = Arc::new(
        MemoryStore::new(&a_home, 2200, 1375)
            .with_shared(a_shared)
            .unwrap(),
    );
    assert_eq!(a.entries(Target::User), vec!["prefers metric units"]);

    let (_b_dir, b_home, b_shared) = instance(&cluster);
    let b = Arc::new(
        MemoryStore::new(&b_home, 2200, 1375)
            .with_shared(b_shared)
            .unwrap(),
    );
    assert_eq!(
        b.entries(Target::User),
        vec!["prefers metric units"],
        "seeded once, read by B"
    );

    // Both instances add at once: every change re-reads under the cluster-wide lock, so
    // none is lost.
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let store = if i % 2 == 0 {
                Arc::clone(&a)
            } else {
                Arc::clone(&b)
            };
            std::thread::spawn(move || {
                let result = store.add(Target::Memory, &format!("fact number {i}"));
                assert_eq!(result["success"], true, "{result}");
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    let (_c_dir, c_home, c_shared) = instance(&cluster);
    let c = MemoryStore::new(&c_home, 2200, 1375)
        .with_shared(c_shared)
        .unwrap();
    let mut facts = c.entries(Target::Memory);
    facts.sort();
    let mut expected: Vec<String> = (0..8).map(|i| format!("fact number {i}")).collect();
    expected.sort();
    assert_eq!(facts, expected);
    assert!(
        !a_home.path().join("memories/MEMORY.md").exists(),
        "shared memory is not written to the home"
    );
}
