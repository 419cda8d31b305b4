//! `$HERMES_HOME/hermesd_admin.json`: where the running daemon's admin API actually listens
//! (with `admin.port: 0` the OS picks the port), for the commands that talk to it
//! (`hermesd send`). Written privately once the listener is bound, removed at a clean
//! shutdown; a file a killed daemon left behind is recognised by its process stamp (pid
//! and start time), so a recycled pid is never taken for the daemon.

use std::net::SocketAddr;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::lock_record::write_json_atomic;
use super::process_info;

pub const ADMIN_ADDR_FILE: &str = "hermesd_admin.json";

#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
struct AdminAddrRecord {
    pid: u32,
    /// The process's start time (`/proc/<pid>/stat` field 22).
    start_time: Option<u64>,
    addr: SocketAddr,
}

/// Records `addr` as this process's admin address; a failure is logged, not fatal (the
/// configured address still works).
pub fn publish(home: &Path, addr: SocketAddr) {
    let pid = process_info::current_pid();
    let record = AdminAddrRecord {
        pid,
        start_time: process_info::start_time(pid),
        addr,
    };
    if let Err(e) = write_json_atomic(&home.join(ADMIN_ADDR_FILE), &record) {
        tracing::warn!(error = %e, file = ADMIN_ADDR_FILE, "cannot record the admin API's address");
    }
}

/// Removes the record if it is this process's.
pub fn withdraw(home: &Path) {
    let path = home.join(ADMIN_ADDR_FILE);
    if read(&path).is_some_and(|r| r.pid == process_info::current_pid()) {
        let _ = std::fs::remove_file(path);
    }
}

fn read(path: &Path) -> Option<AdminAddrRecord> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

/// The admin address of the daemon running on `home`, if one recorded it and still runs.
pub fn running_admin_addr(home: &Path) -> Option<SocketAddr> {
    let record = read(&home.join(ADMIN_ADDR_FILE))?;
    let alive = process_info::pid_exists(record.pid)
        && process_info::start_time(record.pid) == record.start_time;
    alive.then_some(record.addr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_by_a_live_process_and_ignored_once_it_is_gone() {
        let home = tempfile::tempdir().unwrap();
        assert_eq!(running_admin_addr(home.path()), None);
        let addr: SocketAddr = "127.0.0.1:45678".parse().unwrap();
        publish(home.path(), addr);
        assert_eq!(running_admin_addr(home.path()), Some(addr));
        // Another start time: a different process under a recycled pid.
        let stale = AdminAddrRecord {
            pid: process_info::current_pid(),
            start_time: Some(1),
            addr,
        };
        write_json_atomic(&home.path().join(ADMIN_ADDR_FILE), &stale).unwrap();
        assert_eq!(running_admin_addr(home.path()), None);
        publish(home.path(), addr);
        withdraw(home.path());
        assert!(!home.path().join(ADMIN_ADDR_FILE).exists());
    }
}
