//! Pairing interoperability with the real Python Hermes 0.19.0 on one HERMES_HOME: codes
//! issued by either side are approved by the other, and rate limits, lockouts, approvals
//! and revocations written by one are honoured by the other.

mod support;

use std::path::Path;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use hermesd::gateway::pairing::{PairingRequest, PairingStore};
use hermesd::home::HermesHome;
use serde_json::{Value, json};

/// `python -c PY argv...`: one PairingStore operation, its result printed as JSON.
const PY: &str = r#"
import json, sys
from gateway.pairing import PairingStore
s = PairingStore()
cmd, args = sys.argv[1], sys.argv[2:]
if cmd == "issue":
    out = s.generate_code(*args)
elif cmd == "approve":
    out = s.approve_code(*args)
elif cmd == "revoke":
    out = s.revoke(*args)
elif cmd == "state":
    platform, user = args
    out = {
        "dir": str(s._dir),
        "approved": s.list_approved(),
        "pending": s.list_pending(),
        "is_approved": s.is_approved(platform, user),
        "rate_limited": s._is_rate_limited(platform, user),
        "locked": s._is_locked_out(platform),
    }
print(json.dumps(out))
"#;

fn python(home: &Path, args: &[&str]) -> Value {
    support::python::run(PY, args, home, "")
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

fn hermesd(home: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_hermesd"))
        .args(args)
        .env_clear()
        .env("HOME", home.join("user-home"))
        .env("HERMES_HOME", home)
        .env("HERMES_TEST_ISOLATION", "1")
        .output()
        .expect("run hermesd")
}

#[test]
fn codes_and_grants_cross_between_python_and_hermesd() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();

    // Python issues, `hermesd pairing approve` approves, Python sees the user.
    let code = python(home, &["issue", "telegram", "42", "bob"]);
    let code = code.as_str().expect("python issued a code").to_lowercase();
    let out = hermesd(home, &["pairing", "approve", "telegram", &code]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("Approved: bob (42) may now use the bot on telegram")
    );
    let state = python(home, &["state", "telegram", "42"]);
    assert_eq!(state["is_approved"], json!(true));
    assert_eq!(state["approved"][0]["user_name"], json!("bob"));
    assert!(state["approved"][0]["approved_at"].is_f64());

    // hermesd issues; Python sees the pending entry and the rate limit, and approves it.
    let store = PairingStore::open(&HermesHome::at(home)).unwrap();
    let PairingRequest::Issued(code) = store.request_code("discord", "7", "ann", now()).unwrap()
    else {
        panic!("no code")
    };
    let state = python(home, &["state", "discord", "7"]);
    assert_eq!(state["rate_limited"], json!(true));
    let pending = &state["pending"][0];
    assert_eq!(pending["platform"], json!("discord"));
    assert_eq!(pending["user_name"], json!("ann"));
    assert_eq!(pending["age_minutes"], json!(0));
    assert_eq!(pending["code"].as_str().unwrap().len(), 8);
    let approved = python(home, &["approve", "discord", code.as_str()]);
    assert_eq!(approved, json!({"user_id": "7", "user_name": "ann"}));
    assert!(store.is_approved("discord", "7"));

    // A lockout counted here holds in Python; a revocation there holds here.
    for _ in 0..5 {
        store.approve("slack", "WRONG234", now()).unwrap_err();
    }
    assert_eq!(
        python(home, &["state", "slack", "U1"])["locked"],
        json!(true)
    );
    assert_eq!(python(home, &["revoke", "telegram", "42"]), json!(true));
    assert!(!store.is_approved("telegram", "42"));
}

#[test]
fn both_pick_the_same_directory() {
    let dir = tempfile::tempdir().unwrap();
    for (home, legacy) in [
        (dir.path().join("new"), false),
        (dir.path().join("old"), true),
    ] {
        if legacy {
            std::fs::create_dir_all(home.join("pairing")).unwrap();
            std::fs::write(home.join("pairing/matrix-approved.json"), "{}").unwrap();
        }
        let state = python(&home, &["state", "telegram", "1"]);
        let store = PairingStore::open(&HermesHome::at(&home)).unwrap();
        let python_dir = std::fs::canonicalize(state["dir"].as_str().unwrap()).unwrap();
        let our_dir = std::fs::canonicalize(&store.paths().dir).unwrap();
        assert_eq!(python_dir, our_dir, "legacy={legacy}");
    }
}
