//! systemd readiness and watchdog notifications (`sd_notify(3)`): one datagram per state
//! change to `$NOTIFY_SOCKET`, a filesystem path or an abstract socket written `@name`.
//! Without `NOTIFY_SOCKET` (not under systemd `Type=notify`) every call is a no-op.

use std::collections::BTreeMap;
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Path(PathBuf),
    Abstract(Vec<u8>),
}

/// Sends `READY=1`, `RELOADING=1`, `STOPPING=1`, `WATCHDOG=1` and `STATUS=` to the service
/// manager.
#[derive(Debug, Clone, Default)]
pub struct Notifier {
    target: Option<Target>,
}

impl Notifier {
    /// Reads `NOTIFY_SOCKET` from the environment map.
    pub fn from_env(env: &BTreeMap<String, String>) -> Self {
        let target =
            env.get("NOTIFY_SOCKET")
                .filter(|s| !s.is_empty())
                .map(|s| match s.strip_prefix('@') {
                    Some(name) => Target::Abstract(name.as_bytes().to_vec()),
                    None => Target::Path(PathBuf::from(s)),
                });
        Self { target }
    }

    /// Whether notifications go anywhere.
    pub fn is_enabled(&self) -> bool {
        self.target.is_some()
    }

    pub fn ready(&self) -> std::io::Result<()> {
        self.send("READY=1")
    }

    /// A configuration reload begins; `READY=1` ends it. systemd ≥ 253 (`Type=notify-reload`)
    /// requires `MONOTONIC_USEC` with `RELOADING=1` to tell this reload from an older one;
    /// older versions ignore the field.
    pub fn reloading(&self) -> std::io::Result<()> {
        self.send(&reloading_message(monotonic_usec()))
    }

    pub fn stopping(&self) -> std::io::Result<()> {
        self.send("STOPPING=1")
    }

    pub fn watchdog(&self) -> std::io::Result<()> {
        self.send("WATCHDOG=1")
    }

    /// A one-line status shown by `systemctl status`; newlines would end the field early.
    pub fn status(&self, text: &str) -> std::io::Result<()> {
        self.send(&format!("STATUS={}", text.replace('\n', " ")))
    }

    fn send(&self, message: &str) -> std::io::Result<()> {
        let Some(target) = &self.target else {
            return Ok(());
        };
        let socket = UnixDatagram::unbound()?;
        match target {
            Target::Path(path) => socket.send_to(message.as_bytes(), path)?,
            Target::Abstract(name) => send_abstract(&socket, name, message)?,
        };
        Ok(())
    }
}

fn reloading_message(monotonic_usec: u64) -> String {
    format!("RELOADING=1\nMONOTONIC_USEC={monotonic_usec}")
}

/// `CLOCK_MONOTONIC` in microseconds, the clock systemd compares `MONOTONIC_USEC` with.
fn monotonic_usec() -> u64 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (now.tv_sec as u64) * 1_000_000 + (now.tv_nsec as u64) / 1_000
}

#[cfg(target_os = "linux")]
fn send_abstract(socket: &UnixDatagram, name: &[u8], message: &str) -> std::io::Result<usize> {
    use std::os::linux::net::SocketAddrExt;
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
    socket.send_to_addr(message.as_bytes(), &addr)
}

#[cfg(not(target_os = "linux"))]
fn send_abstract(_: &UnixDatagram, _: &[u8], _: &str) -> std::io::Result<usize> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "abstract sockets exist only on Linux",
    ))
}

/// `WATCHDOG_USEC` is divided by this to get the ping interval.
///
/// `sd_watchdog_enabled(3)` asks for a ping at least every half of the timeout; that leaves
/// no room for a late ping. Ours are sent from the daemon's main loop only after a health
/// probe (so a wedged gateway stops pinging and is restarted), and on a loaded machine that
/// loop, its timer and the probe can each be late. A third means one ping may be late by a
/// whole interval and the next still arrives within the timeout.
pub const WATCHDOG_DIVISOR: u64 = 3;

/// How often to send `WATCHDOG=1`: a third of `WATCHDOG_USEC` (see [`WATCHDOG_DIVISOR`]),
/// and only if `WATCHDOG_PID` is unset or names `own_pid`.
pub fn watchdog_interval(env: &BTreeMap<String, String>, own_pid: u32) -> Option<Duration> {
    if let Some(pid) = env.get("WATCHDOG_PID")
        && pid.trim().parse::<u32>().ok() != Some(own_pid)
    {
        return None;
    }
    let usec: u64 = env.get("WATCHDOG_USEC")?.trim().parse().ok()?;
    (usec > 0).then(|| Duration::from_micros(usec / WATCHDOG_DIVISOR))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn receive(listener: &UnixDatagram) -> String {
        let mut buf = [0u8; 256];
        let n = listener.recv(&mut buf).expect("datagram");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    #[test]
    fn sends_each_state_to_a_path_socket() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("notify.sock");
        let listener = UnixDatagram::bind(&path).expect("bind");
        listener
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let notifier = Notifier::from_env(&env(&[("NOTIFY_SOCKET", &path.to_string_lossy())]));
        assert!(notifier.is_enabled());
        notifier.ready().expect("ready");
        notifier.watchdog().expect("watchdog");
        notifier.status("draining\n2 agents").expect("status");
        notifier.stopping().expect("stopping");
        assert_eq!(receive(&listener), "READY=1");
        assert_eq!(receive(&listener), "WATCHDOG=1");
        assert_eq!(receive(&listener), "STATUS=draining 2 agents");
        assert_eq!(receive(&listener), "STOPPING=1");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn sends_to_an_abstract_socket() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("hermesd-test-{}", std::process::id());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())
            .expect("abstract address");
        let listener = UnixDatagram::bind_addr(&addr).expect("bind abstract");
        listener
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let notifier = Notifier::from_env(&env(&[("NOTIFY_SOCKET", &format!("@{name}"))]));
        notifier.ready().expect("ready");
        assert_eq!(receive(&listener), "READY=1");
    }

    #[test]
    fn reloading_carries_the_monotonic_clock() {
        assert_eq!(
            reloading_message(1_234_567),
            "RELOADING=1\nMONOTONIC_USEC=1234567"
        );
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("notify.sock");
        let listener = UnixDatagram::bind(&path).expect("bind");
        listener
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let notifier = Notifier::from_env(&env(&[("NOTIFY_SOCKET", &path.to_string_lossy())]));
        let before = monotonic_usec();
        notifier.reloading().expect("reloading");
        let after = monotonic_usec();
        let message = receive(&listener);
        let usec: u64 = message
            .strip_prefix("RELOADING=1\nMONOTONIC_USEC=")
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{message:?}"));
        assert!(before <= usec && usec <= after, "{before} {usec} {after}");
    }

    #[test]
    fn without_notify_socket_nothing_is_sent() {
        let notifier = Notifier::from_env(&env(&[]));
        assert!(!notifier.is_enabled());
        notifier.ready().expect("no-op");
    }

    #[test]
    fn watchdog_interval_is_a_third_and_respects_the_pid() {
        let usec = [("WATCHDOG_USEC", "30000000")];
        assert_eq!(
            watchdog_interval(&env(&usec), 7),
            Some(Duration::from_secs(10))
        );
        // Not a whole number of seconds: microsecond precision, rounded down.
        let odd = [("WATCHDOG_USEC", "1000000")];
        assert_eq!(
            watchdog_interval(&env(&odd), 7),
            Some(Duration::from_micros(333_333))
        );
        let other = [("WATCHDOG_USEC", "30000000"), ("WATCHDOG_PID", "8")];
        assert_eq!(watchdog_interval(&env(&other), 7), None);
        let ours = [("WATCHDOG_USEC", "30000000"), ("WATCHDOG_PID", "7")];
        assert_eq!(
            watchdog_interval(&env(&ours), 7),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            watchdog_interval(&env(&[("WATCHDOG_USEC", "soon")]), 7),
            None
        );
        assert_eq!(watchdog_interval(&env(&[("WATCHDOG_USEC", "0")]), 7), None);
        assert_eq!(watchdog_interval(&env(&[]), 7), None);
    }
}
