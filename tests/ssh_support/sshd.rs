//! A real OpenSSH server for the ssh backend's tests: Debian's `/usr/sbin/sshd` run in the
//! foreground (`-D -e`) on a free 127.0.0.1 port with its own config, a freshly generated
//! host key and an authorized-keys file holding a freshly generated client key. Readiness is
//! sshd's own "Server listening" log line, read from its stderr (no polling, no sleeps).
//!
//! sshd_config keywords used are those of sshd_config(5):
//! <https://man.openbsd.org/sshd_config>.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use hermesd::config::SshSettings;

const SSHD: &str = "/usr/sbin/sshd";

/// How long sshd gets to start listening.
const START_TIMEOUT: Duration = Duration::from_secs(30);

pub struct Sshd {
    dir: tempfile::TempDir,
    port: u16,
    max_sessions: u32,
    child: Option<Child>,
    /// The client key sshd accepts.
    pub client_key: PathBuf,
    /// A known-hosts file listing sshd's host key for `[127.0.0.1]:port`.
    pub known_hosts: PathBuf,
    /// `SHA256:…` of the host key (from ssh-keygen).
    pub host_fingerprint: String,
}

fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} cannot run ({e}): install openssh-client"));
    assert!(
        out.status.success(),
        "{program} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// Generates an ed25519 key pair at `path` (and `path.pub`), with `passphrase` ("" for none).
pub fn keygen(path: &Path, passphrase: &str) {
    run(
        "ssh-keygen",
        &[
            "-q",
            "-t",
            "ed25519",
            "-N",
            passphrase,
            "-C",
            "hermesd-test",
            "-f",
            path.to_str().expect("utf-8 path"),
        ],
    );
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local addr").port()
}

impl Sshd {
    pub fn start() -> Self {
        Self::start_with(100)
    }

    /// A server allowing at most `max_sessions` channels per connection (sshd's MaxSessions).
    pub fn start_with(max_sessions: u32) -> Self {
        assert!(
            Path::new(SSHD).is_file(),
            "{SSHD} is missing: install openssh-server (apt-get install openssh-server openssh-client) to run the ssh backend tests"
        );
        let dir = tempfile::tempdir().expect("temp dir");
        let host_key = dir.path().join("host_ed25519");
        keygen(&host_key, "");
        let client_key = dir.path().join("client_ed25519");
        keygen(&client_key, "");
        std::fs::copy(
            dir.path().join("client_ed25519.pub"),
            dir.path().join("authorized_keys"),
        )
        .expect("authorized_keys");
        let host_fingerprint = run(
            "ssh-keygen",
            &["-l", "-f", host_key.with_extension("pub").to_str().unwrap()],
        )
        .split_whitespace()
        .nth(1)
        .expect("fingerprint")
        .to_owned();
        let mut sshd = Self {
            known_hosts: dir.path().join("known_hosts"),
            client_key,
            host_fingerprint,
            dir,
            port: 0,
            max_sessions,
            child: None,
        };
        for _ in 0..5 {
            sshd.port = free_port();
            if sshd.launch() {
                let public = std::fs::read_to_string(sshd.dir.path().join("host_ed25519.pub"))
                    .expect("host key");
                let mut fields = public.split_whitespace();
                let line = format!(
                    "[127.0.0.1]:{} {} {}\n",
                    sshd.port,
                    fields.next().unwrap(),
                    fields.next().unwrap()
                );
                std::fs::write(&sshd.known_hosts, line).expect("known_hosts");
                return sshd;
            }
        }
        panic!("sshd found no free port in five tries");
    }

    /// The listening sshd's process id (its sessions are its children).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn config(&self) -> PathBuf {
        let path = self.dir.path().join("sshd_config");
        let d = self.dir.path().display();
        std::fs::write(
            &path,
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_ed25519\nPidFile none\n\
                 UsePAM no\nStrictModes no\nAuthorizedKeysFile {d}/authorized_keys\n\
                 PubkeyAuthentication yes\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n\
                 MaxStartups 100\nMaxSessions {sessions}\nLogLevel INFO\n",
                port = self.port,
                sessions = self.max_sessions
            ),
        )
        .expect("sshd_config");
        path
    }

    /// Starts sshd on `self.port`; false if the port was taken.
    fn launch(&mut self) -> bool {
        if rustix::process::geteuid().is_root() {
            // sshd refuses to start without its privilege-separation directory.
            std::fs::create_dir_all("/run/sshd").expect("/run/sshd");
        }
        let config = self.config();
        let mut child = Command::new(SSHD)
            .args(["-D", "-e", "-f"])
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start sshd");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = mpsc::channel::<Result<(), String>>();
        let log = self.dir.path().join("sshd.log");
        std::thread::spawn(move || {
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .expect("sshd log");
            let mut seen = String::new();
            let mut told = false;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                use std::io::Write;
                let _ = writeln!(file, "{line}");
                if told {
                    continue;
                }
                seen.push_str(&line);
                seen.push('\n');
                if line.contains("Server listening on") {
                    told = tx.send(Ok(())).is_ok();
                } else if line.contains("Address already in use") {
                    told = tx.send(Err(line)).is_ok();
                }
            }
            if !told {
                let _ = tx.send(Err(format!("sshd exited before listening:\n{seen}")));
            }
        });
        match rx.recv_timeout(START_TIMEOUT) {
            Ok(Ok(())) => {
                self.child = Some(child);
                true
            }
            Ok(Err(why)) if why.contains("Address already in use") => {
                let _ = child.kill();
                let _ = child.wait();
                false
            }
            Ok(Err(why)) => panic!("sshd did not start: {why}"),
            Err(_) => panic!("sshd did not listen within {START_TIMEOUT:?}"),
        }
    }

    /// SIGKILL to sshd and every process under it (its sessions and their commands): the
    /// machine "goes away" without closing anything cleanly.
    pub fn kill_all(&mut self) {
        if let Some(mut child) = self.child.take() {
            let all = descendants(child.id());
            for pid in std::iter::once(child.id()).chain(all) {
                if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
                    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                }
            }
            let _ = child.wait();
        }
    }

    /// Starts sshd again on the same port with the same keys.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "kill_all first");
        assert!(
            self.launch(),
            "port {} was taken before sshd restarted",
            self.port
        );
    }

    /// Established TCP connections to sshd's port right now (from /proc/net/tcp, as `ss`
    /// reads them): one line per connection seen from the client's side.
    pub fn established_connections(&self) -> usize {
        let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
        let wanted = format!(":{:04X}", self.port);
        table
            .lines()
            .skip(1)
            .filter(|line| {
                let cols: Vec<&str> = line.split_whitespace().collect();
                // cols: sl local_address rem_address st ...; st 01 is ESTABLISHED.
                cols.len() > 3 && cols[2].ends_with(&wanted) && cols[3] == "01"
            })
            .count()
    }

    /// Settings pointing at this server with the accepted key and the right known-hosts file.
    pub fn settings(&self) -> SshSettings {
        SshSettings {
            host: Some("127.0.0.1".to_owned()),
            user: None,
            port: self.port,
            key: Some(self.client_key.clone()),
            known_hosts: Some(self.known_hosts.clone()),
            host_key_checking: true,
        }
    }
}

/// Every process whose parent chain leads to `root` (read from /proc/*/stat).
fn descendants(root: u32) -> Vec<u32> {
    let mut parent_of = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // The command name is in parentheses and may hold spaces: the ppid follows the last ')'.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        if let Some(ppid) = rest
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<u32>().ok())
        {
            parent_of.push((pid, ppid));
        }
    }
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            parent_of
                .iter()
                .filter(|(_, pp)| *pp == parent)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    found.remove(0);
    found
}

/// Processes whose command line contains `marker` (as `pgrep -f` finds them).
pub fn processes_with(marker: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if pid == std::process::id() {
            continue;
        }
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline"))
            && String::from_utf8_lossy(&cmdline).contains(marker)
        {
            pids.push(pid);
        }
    }
    pids
}

impl Drop for Sshd {
    fn drop(&mut self) {
        self.kill_all();
    }
}
