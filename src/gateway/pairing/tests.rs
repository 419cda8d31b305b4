//! The pairing rules, each constant exercised with explicit time.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::{Value, json};

use super::*;
use crate::home::HermesHome;

const T0: f64 = 1_800_000_000.25;

fn store() -> (tempfile::TempDir, PairingStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = PairingStore::open(&HermesHome::at(dir.path())).unwrap();
    (dir, store)
}

fn issue(store: &PairingStore, platform: &str, user: &str, now: f64) -> PairingCode {
    match store.request_code(platform, user, "", now).unwrap() {
        PairingRequest::Issued(code) => code,
        other => panic!("expected a code for {user}, got {other:?}"),
    }
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn only_a_salted_hash_of_the_code_is_stored_and_files_are_0600() {
    let (dir, store) = store();
    let code = issue(&store, "telegram", "42", T0);
    store.approve("discord", "WRONGONE", T0).unwrap_err();
    let paths = store.paths();
    let pending = read_json(&paths.pending("telegram"));
    let (entry_id, entry) = pending.as_object().unwrap().iter().next().unwrap();
    assert_eq!(entry_id.len(), 16);
    let salt = hex::decode(entry["salt"].as_str().unwrap()).unwrap();
    assert_eq!(salt.len(), 16);
    assert_eq!(
        entry["hash"].as_str().unwrap(),
        hash_code(code.as_str(), &salt)
    );
    for file in std::fs::read_dir(&paths.dir).unwrap() {
        let path = file.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            !text.contains(code.as_str()),
            "{} holds the code",
            path.display()
        );
        assert_eq!(mode(&path), 0o600, "{}", path.display());
    }
    assert_eq!(mode(&paths.dir), 0o700);
    assert_eq!(paths.dir, dir.path().join("platforms/pairing"));
}

#[test]
fn codes_expire_after_one_hour() {
    let (_dir, store) = store();
    let kept = issue(&store, "telegram", "1", T0);
    let expired = issue(&store, "telegram", "2", T0);
    // Exactly at the TTL a code is still valid; a moment later it is gone.
    let user = store
        .approve("telegram", kept.as_str(), T0 + CODE_TTL_SECONDS)
        .unwrap();
    assert_eq!(user.user_id, "1");
    let err = store
        .approve("telegram", expired.as_str(), T0 + CODE_TTL_SECONDS + 0.5)
        .unwrap_err();
    assert!(matches!(err, ApproveError::NotFound { .. }), "{err:?}");
    assert_eq!(read_json(&store.paths().pending("telegram")), json!({}));
    assert!(store.list_pending(None, T0 + 7200.0).unwrap().is_empty());
}

#[test]
fn one_request_per_user_per_ten_minutes() {
    let (_dir, store) = store();
    issue(&store, "telegram", "42", T0);
    let again = store
        .request_code("telegram", "42", "", T0 + RATE_LIMIT_SECONDS - 0.01)
        .unwrap();
    assert_eq!(again, PairingRequest::RateLimited);
    // Another user, and the same user elsewhere, are not limited.
    issue(&store, "telegram", "43", T0 + 1.0);
    issue(&store, "discord", "42", T0 + 1.0);
    issue(&store, "telegram", "42", T0 + RATE_LIMIT_SECONDS);
    let limits = read_json(&store.paths().rate_limits());
    assert_eq!(limits["telegram:42"], json!(T0 + RATE_LIMIT_SECONDS));
    assert_eq!(limits["discord:42"], json!(T0 + 1.0));
}

#[test]
fn at_most_three_codes_pending_per_platform() {
    let (_dir, store) = store();
    for user in ["a", "b", "c"] {
        issue(&store, "telegram", user, T0);
    }
    assert_eq!(MAX_PENDING_PER_PLATFORM, 3);
    let fourth = store.request_code("telegram", "d", "", T0 + 1.0).unwrap();
    assert_eq!(fourth, PairingRequest::TooManyPending);
    // The refusal was an answer, so "d" is now rate limited (silent) ...
    let repeat = store.request_code("telegram", "d", "", T0 + 2.0).unwrap();
    assert_eq!(repeat, PairingRequest::RateLimited);
    // ... other platforms are unaffected, and expiry frees the slots.
    issue(&store, "slack", "e", T0 + 2.0);
    issue(&store, "telegram", "f", T0 + CODE_TTL_SECONDS + 1.0);
    assert_eq!(
        store
            .list_pending(Some("telegram"), T0 + 3602.0)
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn five_failed_approvals_lock_the_platform_for_an_hour() {
    let (_dir, store) = store();
    let code = issue(&store, "telegram", "42", T0);
    for attempt in 1..MAX_FAILED_ATTEMPTS {
        let err = store.approve("telegram", "BADC0DE2", T0 + 1.0).unwrap_err();
        assert!(
            matches!(err, ApproveError::NotFound { .. }),
            "attempt {attempt}: {err:?}"
        );
    }
    let limits = read_json(&store.paths().rate_limits());
    assert_eq!(limits["_failures:telegram"], json!(4));
    let err = store.approve("telegram", "BADC0DE2", T0 + 2.0).unwrap_err();
    let until = T0 + 2.0 + LOCKOUT_SECONDS;
    assert!(
        matches!(err, ApproveError::LockedOut { until: u, .. } if u == until),
        "{err:?}"
    );
    let limits = read_json(&store.paths().rate_limits());
    assert_eq!(limits["_failures:telegram"], json!(0));
    assert_eq!(limits["_lockout:telegram"], json!(until));
    // Locked: even the right code is refused, and no new codes are issued.
    let err = store
        .approve("telegram", code.as_str(), T0 + 3.0)
        .unwrap_err();
    assert!(matches!(err, ApproveError::LockedOut { .. }), "{err:?}");
    let request = store
        .request_code("telegram", "77", "", until - 0.01)
        .unwrap();
    assert_eq!(request, PairingRequest::LockedOut);
    assert_eq!(
        store.lockout_remaining("telegram", until - 10.0).unwrap(),
        10.0
    );
    // Other platforms are not locked; the lockout ends on time.
    issue(&store, "discord", "42", T0 + 3.0);
    let fresh = issue(&store, "telegram", "78", until);
    assert_eq!(
        store
            .approve("telegram", fresh.as_str(), until)
            .unwrap()
            .user_id,
        "78"
    );
}

#[test]
fn approval_is_case_insensitive_and_records_the_user() {
    let (_dir, store) = store();
    let code = store.request_code("telegram", " 42 ", "Bob", T0).unwrap();
    let PairingRequest::Issued(code) = code else {
        panic!("{code:?}")
    };
    let typed = format!("  {}\n", code.as_str().to_lowercase());
    let user = store.approve("telegram", &typed, T0 + 5.0).unwrap();
    assert_eq!(
        user,
        ApprovedUser {
            user_id: "42".into(),
            user_name: "Bob".into()
        }
    );
    assert!(store.is_approved("telegram", "42"));
    assert!(store.is_approved("telegram", " 42"));
    assert!(!store.is_approved("discord", "42"));
    assert!(!store.is_approved("telegram", ""));
    assert_eq!(
        read_json(&store.paths().approved("telegram")),
        json!({"42": {"user_name": "Bob", "approved_at": T0 + 5.0}})
    );
    // A used code is gone; approving it again is a failure.
    let err = store
        .approve("telegram", code.as_str(), T0 + 6.0)
        .unwrap_err();
    assert!(matches!(err, ApproveError::NotFound { .. }));
    // Pairing again replaces the record instead of duplicating it.
    let again = issue(&store, "telegram", "42", T0 + 700.0);
    store
        .approve("telegram", again.as_str(), T0 + 701.0)
        .unwrap();
    let listed = store.list_approved(None).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].approved_at, Some(T0 + 701.0));
    assert_eq!(listed[0].user_name, "");
}

#[test]
fn revoke_removes_the_user() {
    let (_dir, store) = store();
    let code = issue(&store, "slack", "U1", T0);
    store.approve("slack", code.as_str(), T0).unwrap();
    assert!(store.revoke("slack", "U1").unwrap());
    assert!(!store.is_approved("slack", "U1"));
    assert!(!store.revoke("slack", "U1").unwrap());
    assert!(!store.revoke("telegram", "U1").unwrap());
}

#[test]
fn listing_shows_a_hash_prefix_and_age_never_the_code() {
    let (_dir, store) = store();
    let code = store.request_code("telegram", "42", "bob", T0).unwrap();
    let PairingRequest::Issued(code) = code else {
        panic!()
    };
    let listed = store.list_pending(None, T0 + 179.0).unwrap();
    let hash = read_json(&store.paths().pending("telegram"))
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap()["hash"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        listed,
        vec![PendingRequest {
            platform: "telegram".into(),
            code: hash[..8].to_owned(),
            user_id: "42".into(),
            user_name: "bob".into(),
            age_minutes: 2,
        }]
    );
    assert_ne!(listed[0].code, code.as_str());
}

#[test]
fn platform_names_cannot_escape_the_directory() {
    let (_dir, store) = store();
    for bad in ["../x", "", "_rate", "a/b", "Tele gram", "-x"] {
        assert!(matches!(
            store.request_code(bad, "1", "", T0),
            Err(PairingError::InvalidPlatform(_))
        ));
        assert!(!store.is_approved(bad, "1"));
    }
}

/// Authorization asks on every inbound event: the approvals file is read once and then
/// answered from memory until another process (the pairing CLI here) replaces it.
#[test]
fn approvals_are_cached_until_another_process_changes_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let home = HermesHome::at(dir.path());
    let daemon = PairingStore::open(&home).unwrap();
    let cli = PairingStore::open(&home).unwrap();
    assert!(!daemon.is_approved("telegram", "42"));
    for _ in 0..100 {
        assert!(!daemon.is_approved("telegram", "42"));
    }
    assert_eq!(daemon.approval_file_reads(), 1);

    let code = issue(&daemon, "telegram", "42", T0);
    cli.approve("telegram", code.as_str(), T0 + 1.0).unwrap();
    assert!(daemon.is_approved("telegram", " 42 "));
    assert!(!daemon.is_approved("telegram", "43"));
    assert_eq!(daemon.approval_file_reads(), 2);

    assert!(cli.revoke("telegram", "42").unwrap());
    assert!(!daemon.is_approved("telegram", "42"));
    assert_eq!(daemon.approval_file_reads(), 3);
}
