//! Process-group plumbing every child we start shares: which shell to run, how an exit
//! status reads as a number, and stopping a whole group (TERM, then KILL after a second)
//! so a command's own children die with it.

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

use rustix::process::{Pid, Signal, kill_process_group, test_kill_process_group};
use tokio::process::Child;

/// `bash` on the command's `PATH`, else `/bin/bash`, else `/bin/sh` (Python `_find_bash`).
pub fn find_bash(env: &BTreeMap<String, String>) -> PathBuf {
    let on_path = env
        .get("PATH")
        .into_iter()
        .flat_map(|p| p.split(':'))
        .filter(|d| !d.is_empty())
        .map(|d| Path::new(d).join("bash"))
        .find(|candidate| candidate.is_file());
    on_path
        .or_else(|| {
            ["/usr/bin/bash", "/bin/bash"]
                .into_iter()
                .map(PathBuf::from)
                .find(|p| p.is_file())
        })
        .unwrap_or_else(|| PathBuf::from("/bin/sh"))
}

/// The exit code as Python reports it: the code, or minus the signal number.
pub fn exit_code(status: ExitStatus) -> i32 {
    status
        .code()
        .or_else(|| status.signal().map(|s| -s))
        .unwrap_or(-1)
}

fn group_alive(pgid: Pid) -> bool {
    match test_kill_process_group(pgid) {
        Ok(()) => true,
        Err(e) => e != rustix::io::Errno::SRCH,
    }
}

/// Waits until the group has no members (reaping the shell meanwhile), up to `limit`.
async fn wait_group_exit(child: &mut Child, pgid: Pid, limit: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let _ = child.try_wait();
        if !group_alive(pgid) {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Sends TERM to the whole process group, then KILL if anything is left after a second.
pub async fn kill_group(child: &mut Child, pgid: Option<Pid>) {
    let Some(pgid) = pgid else {
        let _ = child.kill().await;
        return;
    };
    if kill_process_group(pgid, Signal::TERM).is_err() {
        let _ = child.try_wait();
        return;
    }
    if wait_group_exit(child, pgid, Duration::from_secs(1)).await {
        return;
    }
    let _ = kill_process_group(pgid, Signal::KILL);
    wait_group_exit(child, pgid, Duration::from_secs(2)).await;
    let _ = tokio::time::timeout(Duration::from_millis(200), child.wait()).await;
}
