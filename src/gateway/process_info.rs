//! Facts about other processes, read the way the Python gateway reads them: liveness through
//! `kill(pid, 0)`, the start-time fingerprint from field 22 of `/proc/<pid>/stat`, the
//! command line from `/proc/<pid>/cmdline` and the stopped state from `/proc/<pid>/status`.
//!
//! A `(pid, start_time)` pair names one process for the lifetime of a boot, so a recycled pid
//! is never mistaken for the process that wrote a lock file.

use std::io::ErrorKind;

use rustix::process::{Pid, Signal};

/// This process's id.
pub fn current_pid() -> u32 {
    rustix::process::getpid()
        .as_raw_nonzero()
        .get()
        .unsigned_abs()
}

fn to_pid(pid: u32) -> Option<Pid> {
    i32::try_from(pid).ok().and_then(Pid::from_raw)
}

/// Whether a process with this id exists (a process we may not signal still exists).
pub fn pid_exists(pid: u32) -> bool {
    let Some(pid) = to_pid(pid) else {
        return false;
    };
    let exists = match rustix::process::test_kill_process(pid) {
        Ok(()) => true,
        Err(e) => e == rustix::io::Errno::PERM,
    };
    // A zombie has exited and released its locks; only its table entry waits to be reaped.
    exists && state(pid.as_raw_nonzero().get().unsigned_abs()) != Some('Z')
}

/// The one-letter state from `/proc/<pid>/status` (`R`, `S`, `T`, `Z`, ...).
fn state(pid: u32) -> Option<char> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("State:"))
        .and_then(|rest| rest.trim_start().chars().next())
}

/// Sends SIGTERM; a process that is already gone is not an error.
pub fn terminate(pid: u32) -> std::io::Result<()> {
    let Some(pid) = to_pid(pid) else {
        return Err(std::io::Error::new(ErrorKind::InvalidInput, "invalid pid"));
    };
    match rustix::process::kill_process(pid, Signal::TERM) {
        Ok(()) => Ok(()),
        Err(e) if e == rustix::io::Errno::SRCH => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// When the process started, in clock ticks after boot (`/proc/<pid>/stat` field 22), or `None`
/// where `/proc` is unavailable.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is parenthesised and may contain spaces or ')', so count
    // fields from the last ')': field 3 is the first after it, field 22 the 20th.
    let after_comm = &stat[stat.rfind(')')? + 1..];
    after_comm.split_whitespace().nth(19)?.parse().ok()
}

/// The command line joined with spaces, or `None` when unreadable or empty.
pub fn cmdline(pid: u32) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let parts: Vec<String> = raw
        .split(|b| *b == 0)
        .filter(|part| !part.is_empty())
        .map(|part| String::from_utf8_lossy(part).into_owned())
        .collect();
    if parts.is_empty() {
        None
    } else {
        Some(parts.join(" "))
    }
}

/// Whether the process is stopped (`State: T` or `t`), e.g. by Ctrl+Z.
pub fn is_stopped(pid: u32) -> bool {
    matches!(state(pid), Some('T' | 't'))
}

/// Whether a command line is a gateway runtime: Python's `hermes gateway run` (or its
/// dedicated entry points) or our own `hermesd run` / bare `hermesd`.
pub fn looks_like_gateway(command: &str) -> bool {
    let tokens: Vec<String> = command
        .split_whitespace()
        .map(|t| {
            t.trim_matches(|c| c == '"' || c == '\'')
                .replace('\\', "/")
                .to_lowercase()
        })
        .collect();
    let basename = |t: &str| t.rsplit('/').next().unwrap_or_default().to_owned();
    if tokens
        .iter()
        .any(|t| t.ends_with("gateway/run.py") || basename(t) == "hermes-gateway")
    {
        return true;
    }
    let Some(entry) = tokens.iter().position(|t| {
        let name = basename(t);
        name == "hermes" || name == "hermesd" || t.contains("hermes_cli")
    }) else {
        return false;
    };
    let is_hermesd = basename(&tokens[entry]) == "hermesd";
    let mut rest = Vec::new();
    let mut skip_value = false;
    for token in &tokens[entry + 1..] {
        if skip_value {
            skip_value = false;
        } else if matches!(token.as_str(), "--profile" | "-p" | "--home") {
            skip_value = true;
        } else if !token.starts_with('-') {
            rest.push(token.as_str());
        }
    }
    if is_hermesd {
        return matches!(rest.first(), None | Some(&"run"));
    }
    match rest.iter().position(|t| *t == "gateway") {
        Some(i) => matches!(rest.get(i + 1), None | Some(&"run") | Some(&"restart")),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_our_own_process() {
        let pid = current_pid();
        assert!(pid_exists(pid));
        assert!(start_time(pid).is_some_and(|t| t > 0));
        assert!(cmdline(pid).is_some());
        assert!(!is_stopped(pid));
    }

    #[test]
    fn gateway_command_lines() {
        assert!(looks_like_gateway(
            "/usr/bin/python3 -m hermes_cli.main gateway run --replace"
        ));
        assert!(looks_like_gateway(
            "/home/u/.local/bin/hermes -p work gateway run"
        ));
        assert!(looks_like_gateway(
            "/usr/local/bin/hermesd --home /srv/h run --replace"
        ));
        assert!(looks_like_gateway("/usr/local/bin/hermesd"));
        assert!(!looks_like_gateway("/usr/local/bin/hermesd sessions list"));
        assert!(!looks_like_gateway(
            "/home/u/.local/bin/hermes gateway status"
        ));
        assert!(!looks_like_gateway("python -m tui_gateway"));
        assert!(!looks_like_gateway("/usr/sbin/cron -f"));
    }
}
