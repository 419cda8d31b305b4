//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod conditions;
pub mod daemon;
pub mod fake_github;
pub mod fake_model;
pub mod fake_stt;
pub mod fake_tts;
pub mod fake_web;
pub mod fake_whatsapp;
pub mod fts5_cjk;
pub mod images;
pub mod mcp_servers;
pub mod owners;
pub mod pg_proxy;
pub mod postgres;
pub mod providers;
pub mod python;
pub mod round_robin;
pub mod scripted_adapter;
pub mod store_backends;
pub mod test_platform;

/// An owner stamp for a process that has exited: a reaped child's pid with a start time no
/// process can have, so even a recycled pid does not match it.
pub fn dead_owner() -> hermesd::state::OwnerStamp {
    let mut child = std::process::Command::new("true")
        .spawn()
        .expect("spawn true");
    child.wait().expect("wait for true");
    hermesd::state::OwnerStamp {
        pid: i64::from(child.id()),
        started_at: Some(-1),
    }
}

/// A store on `path` that stamps delivery obligations as owned by `owner`, standing in for
/// another (possibly dead) gateway process.
pub fn store_owned_by(
    path: &std::path::Path,
    owner: hermesd::state::OwnerStamp,
) -> hermesd::state::Store {
    let options = hermesd::state::StoreOptions {
        ledger_owner: owner,
        ..hermesd::state::StoreOptions::default()
    };
    hermesd::state::Store::open_with(path, options).expect("open store")
}
