//! What the daemon's descriptors are, by kind, so a change in their number can be pinned on
//! something: `/proc/PID/fd` links, with sockets resolved through `/proc/PID/net/{tcp,tcp6,unix}`
//! to their state and the peer's port, and the peer port named after the fake it belongs
//! to (`telegram`, `discord`, `slack`, `model`); files are shown relative to the home.

use std::collections::{BTreeMap, HashMap};

/// Descriptor kinds and how many of each.
pub type FdKinds = BTreeMap<String, usize>;

/// TCP states as `/proc/net/tcp` numbers them (`include/net/tcp_states.h`).
fn tcp_state(hex: &str) -> &'static str {
    match hex {
        "01" => "established",
        "02" => "syn-sent",
        "06" => "time-wait",
        "07" => "close",
        "08" => "close-wait",
        "09" => "last-ack",
        "0A" => "listen",
        "0B" => "closing",
        "04" => "fin-wait1",
        "05" => "fin-wait2",
        _ => "other",
    }
}

/// Socket inode → label, from the process's view of its network namespace.
fn socket_labels(pid: u32, ports: &HashMap<u16, String>) -> HashMap<String, String> {
    let port = |addr: &str| {
        addr.rsplit(':')
            .next()
            .and_then(|p| u16::from_str_radix(p, 16).ok())
            .unwrap_or(0)
    };
    // (inode, local port, remote port, state) of every TCP socket.
    let mut tcp = Vec::new();
    for table in ["tcp", "tcp6"] {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let cols: Vec<&str> = line.split_whitespace().collect();
            if let (Some(local), Some(remote), Some(state), Some(inode)) =
                (cols.get(1), cols.get(2), cols.get(3), cols.get(9))
            {
                tcp.push((
                    (*inode).to_owned(),
                    port(local),
                    port(remote),
                    tcp_state(state),
                ));
            }
        }
    }
    let listening: Vec<u16> = tcp
        .iter()
        .filter(|(.., state)| *state == "listen")
        .map(|(_, local, ..)| *local)
        .collect();
    let mut labels = HashMap::new();
    for (inode, local, remote, state) in tcp {
        let label = if state == "listen" {
            "tcp listen".to_owned()
        } else if let Some(name) = ports.get(&remote) {
            format!("tcp {state} to {name}")
        } else if listening.contains(&local) {
            // A client of the daemon's own listener (the HTTP API, the admin endpoint).
            format!("tcp {state} from a client of :{local}")
        } else {
            format!("tcp {state} to :{remote}")
        };
        labels.insert(inode, label);
    }
    if let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/net/unix")) {
        for line in text.lines().skip(1) {
            if let Some(inode) = line.split_whitespace().nth(6) {
                labels
                    .entry(inode.to_owned())
                    .or_insert_with(|| "unix socket".to_owned());
            }
        }
    }
    labels
}

/// The descriptors of `pid` by kind (empty when the process is gone).
pub fn kinds(pid: u32, home: &str, ports: &HashMap<u16, String>) -> FdKinds {
    let mut kinds = FdKinds::new();
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return kinds;
    };
    let mut sockets = None;
    for entry in dir.flatten() {
        let Ok(target) = std::fs::read_link(entry.path()) else {
            continue;
        };
        let target = target.to_string_lossy().into_owned();
        let kind = if let Some(inode) = target
            .strip_prefix("socket:[")
            .and_then(|s| s.strip_suffix(']'))
        {
            let labels = sockets.get_or_insert_with(|| socket_labels(pid, ports));
            labels
                .get(inode)
                .cloned()
                .unwrap_or_else(|| "socket (other)".to_owned())
        } else if target.starts_with("pipe:") {
            "pipe".to_owned()
        } else if let Some(rest) = target.strip_prefix(home) {
            format!("$HOME{rest}")
        } else {
            target
        };
        *kinds.entry(kind).or_default() += 1;
    }
    kinds
}

/// The kinds whose count changed between two readings, as `kind: "a → b"`.
pub fn changed(before: &FdKinds, after: &FdKinds) -> BTreeMap<String, String> {
    before
        .keys()
        .chain(after.keys())
        .filter_map(|kind| {
            let (a, b) = (
                before.get(kind).copied().unwrap_or(0),
                after.get(kind).copied().unwrap_or(0),
            );
            (a != b).then(|| (kind.clone(), format!("{a} → {b}")))
        })
        .collect()
}
