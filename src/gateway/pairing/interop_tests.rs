//! Compatibility with the Python store's files (both directions), its directory rule, the
//! `.env` allowlist mirror, and concurrent stores on one directory.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::*;
use crate::home::HermesHome;

/// Captured from the Python Hermes 0.19.0 `PairingStore.generate_code("telegram", "42",
/// "bob")`, which returned the code `RV2WQMQG`.
const PYTHON_PENDING: &str = r#"{
  "0a97ea08f593e4d9": {
    "hash": "0140a11809f26e8bf2622e806685f51fdf4e1d94549a3eef1e6f2e00c6e64f8d",
    "salt": "defc46c6e0df12ba5c9fa1ede0c76f6c",
    "user_id": "42",
    "user_name": "bob",
    "created_at": 1795985803.480911
  },
  "LEGACYPLAIN": {
    "user_id": "9",
    "user_name": "old",
    "created_at": 1795985800
  }
}"#;
const PYTHON_RATE_LIMITS: &str = r#"{
  "telegram:42": 1795985803.4819386,
  "_failures:telegram": 2
}"#;
const PYTHON_CREATED: f64 = 1795985803.480911;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn a_code_issued_by_python_is_approved_here() {
    let dir = tempfile::tempdir().unwrap();
    let pairing = dir.path().join("platforms/pairing");
    // The fixture's hash really is sha256(salt + code), computed here independently.
    let salt = hex::decode("defc46c6e0df12ba5c9fa1ede0c76f6c").unwrap();
    let computed = hex::encode(Sha256::digest([salt.as_slice(), b"RV2WQMQG"].concat()));
    assert!(PYTHON_PENDING.contains(&computed));
    write(&pairing.join("telegram-pending.json"), PYTHON_PENDING);
    write(&pairing.join("_rate_limits.json"), PYTHON_RATE_LIMITS);
    let store = PairingStore::open(&HermesHome::at(dir.path())).unwrap();

    let listed = store.list_pending(None, PYTHON_CREATED + 60.0).unwrap();
    let codes: Vec<&str> = listed.iter().map(|p| p.code.as_str()).collect();
    assert_eq!(codes, ["0140a118", "legacy"]);
    // Python's rate limit applies here too.
    let again = store
        .request_code("telegram", "42", "bob", PYTHON_CREATED + 60.0)
        .unwrap();
    assert_eq!(again, PairingRequest::RateLimited);

    let user = store
        .approve("telegram", "rv2wqmqg", PYTHON_CREATED + 60.0)
        .unwrap();
    assert_eq!(user.user_id, "42");
    assert_eq!(user.user_name, "bob");
    assert!(store.is_approved("telegram", "42"));
    // The legacy entry is kept until it expires, exactly as written.
    let pending = read_json(&pairing.join("telegram-pending.json"));
    assert_eq!(
        pending,
        json!({"LEGACYPLAIN": {"user_id": "9", "user_name": "old", "created_at": 1795985800}})
    );
    // A failed approval continues Python's failure count.
    store
        .approve("telegram", "WRONG222", PYTHON_CREATED + 61.0)
        .unwrap_err();
    let limits = read_json(&pairing.join("_rate_limits.json"));
    assert_eq!(limits["_failures:telegram"], json!(3));
    assert_eq!(limits["telegram:42"], json!(1795985803.4819386));
}

#[test]
fn users_approved_by_python_are_recognised() {
    let dir = tempfile::tempdir().unwrap();
    write(
        &dir.path().join("platforms/pairing/discord-approved.json"),
        r#"{"123": {"user_name": "ann", "approved_at": 1795985000.5}, "456": {"user_name": null, "approved_at": 1795985001}}"#,
    );
    let store = PairingStore::open(&HermesHome::at(dir.path())).unwrap();
    assert!(store.is_approved("discord", "123"));
    assert!(store.is_approved("discord", "456"));
    let listed = store.list_approved(Some("discord")).unwrap();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0].user_name, "ann");
    assert_eq!(listed[1].approved_at, Some(1795985001.0));
}

#[test]
fn our_files_have_the_shapes_and_layout_python_reads() {
    let dir = tempfile::tempdir().unwrap();
    let store = PairingStore::open(&HermesHome::at(dir.path())).unwrap();
    let now = 1_800_000_000.25;
    let PairingRequest::Issued(code) = store.request_code("telegram", "42", "Bob", now).unwrap()
    else {
        panic!("no code")
    };
    store.request_code("telegram", "43", "", now).unwrap();
    store.approve("slack", "NOPE2345", now).unwrap_err();
    let pending = read_json(&store.paths().pending("telegram"));
    for (entry_id, entry) in pending.as_object().unwrap() {
        assert!(entry_id.len() == 16 && entry_id.chars().all(|c| c.is_ascii_hexdigit()));
        let entry = entry.as_object().unwrap();
        let mut keys: Vec<&str> = entry.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["created_at", "hash", "salt", "user_id", "user_name"]);
        assert_eq!(entry["hash"].as_str().unwrap().len(), 64);
        assert_eq!(entry["salt"].as_str().unwrap().len(), 32);
        assert!(entry["user_id"].is_string() && entry["user_name"].is_string());
        assert!(entry["created_at"].is_f64());
    }
    // The text itself is `json.dumps(indent=2)`: insertion order, two-space indent.
    let text = std::fs::read_to_string(store.paths().pending("telegram")).unwrap();
    let first = text.lines().nth(2).unwrap();
    assert!(first.starts_with("    \"hash\": \""), "{text}");
    let limits = read_json(&store.paths().rate_limits());
    assert!(limits["telegram:42"].is_f64());
    assert!(
        limits["_failures:slack"].is_u64(),
        "an int, as Python counts"
    );

    store.approve("telegram", code.as_str(), now + 1.0).unwrap();
    let approved = std::fs::read_to_string(store.paths().approved("telegram")).unwrap();
    assert_eq!(
        approved,
        "{\n  \"42\": {\n    \"user_name\": \"Bob\",\n    \"approved_at\": 1800000001.25\n  }\n}"
    );
}

#[test]
fn the_legacy_directory_is_used_only_when_it_has_content() {
    // An empty legacy directory, or a dangling symlink, does not count.
    let empty = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(empty.path().join("pairing")).unwrap();
    let store = PairingStore::open(&HermesHome::at(empty.path())).unwrap();
    assert_eq!(store.paths().dir, empty.path().join("platforms/pairing"));

    let dangling = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(
        dangling.path().join("gone"),
        dangling.path().join("pairing"),
    )
    .unwrap();
    let store = PairingStore::open(&HermesHome::at(dangling.path())).unwrap();
    assert_eq!(store.paths().dir, dangling.path().join("platforms/pairing"));

    // A legacy directory with content keeps being used, and no new one appears.
    let legacy = tempfile::tempdir().unwrap();
    write(&legacy.path().join("pairing/telegram-approved.json"), "{}");
    let store = PairingStore::open(&HermesHome::at(legacy.path())).unwrap();
    assert_eq!(store.paths().dir, legacy.path().join("pairing"));
    assert!(!legacy.path().join("platforms/pairing").exists());
}

#[test]
fn split_directories_are_merged_and_revoke_clears_both() {
    let dir = tempfile::tempdir().unwrap();
    let legacy = dir.path().join("pairing/telegram-approved.json");
    let new = dir.path().join("platforms/pairing/telegram-approved.json");
    write(
        &legacy,
        r#"{"1": {"user_name": "active", "approved_at": 1.0}}"#,
    );
    write(
        &new,
        r#"{"1": {"user_name": "stale", "approved_at": 2.0}, "2": {"user_name": "b", "approved_at": 3.0}}"#,
    );
    let home = HermesHome::at(dir.path());
    let store = PairingStore::open(&home).unwrap();
    assert_eq!(store.paths().dir, dir.path().join("pairing"));
    let merged = read_json(&legacy);
    assert_eq!(merged["1"]["user_name"], json!("active"));
    assert_eq!(merged["2"]["user_name"], json!("b"));
    assert!(store.revoke("telegram", "2").unwrap());
    drop(store);
    let store = PairingStore::open(&home).unwrap();
    assert!(
        !store.is_approved("telegram", "2"),
        "revoked user came back"
    );
    assert!(store.is_approved("telegram", "1"));
}

fn approve_one(store: &PairingStore, user: &str, now: f64) {
    let PairingRequest::Issued(code) = store.request_code("telegram", user, "", now).unwrap()
    else {
        panic!("no code for {user}")
    };
    store.approve("telegram", code.as_str(), now).unwrap();
}

#[test]
fn an_existing_env_allowlist_follows_approvals_and_revocations() {
    let dir = tempfile::tempdir().unwrap();
    let dotenv = dir.path().join(".env");
    let original =
        "# keys\nOPENAI_API_KEY=sk-test\nexport TELEGRAM_ALLOWED_USERS=1,2\nOTHER=\"a b\"";
    std::fs::write(&dotenv, original).unwrap();
    std::fs::set_permissions(&dotenv, std::fs::Permissions::from_mode(0o640)).unwrap();
    let store = PairingStore::open(&HermesHome::at(dir.path())).unwrap();

    approve_one(&store, "42", 1000.0);
    let text = std::fs::read_to_string(&dotenv).unwrap();
    assert_eq!(
        text,
        "# keys\nOPENAI_API_KEY=sk-test\nTELEGRAM_ALLOWED_USERS=1,2,42\nOTHER=\"a b\""
    );
    assert_eq!(mode(&dotenv), 0o640);
    assert!(store.revoke("telegram", "42").unwrap());
    let text = std::fs::read_to_string(&dotenv).unwrap();
    assert!(text.contains("\nTELEGRAM_ALLOWED_USERS=1,2\n"), "{text}");
    assert_eq!(mode(&dotenv), 0o640);

    // A user already covered changes nothing; revoking the last one removes the line.
    std::fs::write(&dotenv, "A=1\nTELEGRAM_ALLOWED_USERS=7\n").unwrap();
    approve_one(&store, "7", 2000.0);
    assert_eq!(
        std::fs::read_to_string(&dotenv).unwrap(),
        "A=1\nTELEGRAM_ALLOWED_USERS=7\n"
    );
    assert!(store.revoke("telegram", "7").unwrap());
    assert_eq!(std::fs::read_to_string(&dotenv).unwrap(), "A=1\n");
}

#[test]
fn an_open_gateway_stays_open_and_the_process_env_counts() {
    let dir = tempfile::tempdir().unwrap();
    let dotenv = dir.path().join(".env");
    let store = PairingStore::open(&HermesHome::at(dir.path())).unwrap();
    approve_one(&store, "42", 1000.0);
    assert!(
        !dotenv.exists(),
        "no allowlist configured: .env must not be created"
    );

    let env: BTreeMap<String, String> =
        [("TELEGRAM_ALLOWED_USERS".to_owned(), " 1 ".to_owned())].into();
    let store = store.with_env(env);
    approve_one(&store, "43", 2000.0);
    assert_eq!(
        std::fs::read_to_string(&dotenv).unwrap(),
        "TELEGRAM_ALLOWED_USERS=1,43\n"
    );
    assert_eq!(mode(&dotenv), 0o600);

    let wildcard: BTreeMap<String, String> =
        [("TELEGRAM_ALLOWED_USERS".to_owned(), "*".to_owned())].into();
    std::fs::remove_file(&dotenv).unwrap();
    let store = store.with_env(wildcard);
    approve_one(&store, "44", 3000.0);
    assert!(!dotenv.exists(), "`*` already covers everyone");
}

#[test]
fn two_stores_on_one_directory_lose_no_updates() {
    // Separate stores have separate mutexes, so only the file lock keeps them apart: the
    // shape of a daemon and a CLI process.
    let dir = tempfile::tempdir().unwrap();
    let home = HermesHome::at(dir.path());
    let rounds = 40;
    std::thread::scope(|scope| {
        for side in ["a", "b"] {
            let store = PairingStore::open(&home).unwrap();
            scope.spawn(move || {
                for i in 0..rounds {
                    let platform = format!("{side}{i}");
                    let request = store.request_code(&platform, "u", "", 1000.0).unwrap();
                    assert!(matches!(request, PairingRequest::Issued(_)));
                    if i % 20 == 0 {
                        let err = store.approve("shared", "BADBAD22", 1000.0).unwrap_err();
                        assert!(matches!(err, ApproveError::NotFound { .. }));
                    }
                }
            });
        }
    });
    let store = PairingStore::open(&home).unwrap();
    let limits = read_json(&store.paths().rate_limits());
    for side in ["a", "b"] {
        for i in 0..rounds {
            assert!(
                limits.get(format!("{side}{i}:u")).is_some(),
                "lost {side}{i}"
            );
        }
    }
    // Two failed approvals from each side, all counted.
    assert_eq!(limits["_failures:shared"], json!(4));
}
