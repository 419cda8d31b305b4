//! A real Docker-compatible engine for tests: podman's Docker API service on a unix socket,
//! with a private storage root and run root per test (nothing shared), runc and cgroupfs
//! (what works on these machines), and a test image imported from a busybox rootfs (no
//! registry is reachable). A raw HTTP helper lets a test act on the engine behind the
//! backend's back (remove a container, read its stats).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

pub const IMAGE: &str = "localhost/hermesd-test:latest";

const INSTALL_HINT: &str = "the docker backend's real-engine test needs podman: apt-get install podman runc slirp4netns fuse-overlayfs uidmap busybox-static";

/// What podman needs here (crun fails on these machines; systemd is absent).
const CONTAINERS_CONF: &str = r#"[containers]
default_ulimits=["nofile=1024:1024","nproc=1024:1024"]
[engine]
runtime="runc"
cgroup_manager="cgroupfs"
events_logger="file"
"#;

pub struct Podman {
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
    service: Child,
}

impl Drop for Podman {
    fn drop(&mut self) {
        let _ = self.service.kill();
        let _ = self.service.wait();
        // podman leaves a conmon per exec session waiting out its exit delay, and may leave
        // an overlay mount: end those of this engine (their command lines name its root).
        let root = self.dir.path().display().to_string();
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&cmdline).contains(&root)
                && let Some(pid) = rustix::process::Pid::from_raw(pid)
            {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        for target in mounts.lines().filter_map(|l| l.split(' ').nth(1)) {
            if target.starts_with(&root) {
                let _ = Command::new("umount").arg("-l").arg(target).status();
            }
        }
    }
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|path| path.is_file())
    })
}

impl Podman {
    /// Builds the image and starts the service; fails (never skips) when podman is absent.
    pub async fn start() -> Podman {
        let podman = which("podman").unwrap_or_else(|| panic!("{INSTALL_HINT}"));
        let busybox = which("busybox").unwrap_or_else(|| panic!("{INSTALL_HINT}"));
        let dir = tempfile::tempdir().expect("tempdir");
        let conf = dir.path().join("containers.conf");
        std::fs::write(&conf, CONTAINERS_CONF).expect("write containers.conf");
        let rootfs = dir.path().join("rootfs");
        busybox_rootfs(&busybox, &rootfs);
        let tar = dir.path().join("rootfs.tar");
        let status = Command::new("tar")
            .arg("-C")
            .arg(&rootfs)
            .arg("-cf")
            .arg(&tar)
            .arg(".")
            .status()
            .expect("run tar");
        assert!(status.success(), "tar of the busybox rootfs failed");
        let base = |cmd: &mut Command| {
            cmd.env("CONTAINERS_CONF", &conf)
                .arg("--root")
                .arg(dir.path().join("root"))
                .arg("--runroot")
                .arg(dir.path().join("run"));
        };
        let mut import = Command::new(&podman);
        base(&mut import);
        let out = import
            .arg("import")
            .arg(&tar)
            .arg(IMAGE)
            .output()
            .expect("run podman import");
        assert!(
            out.status.success(),
            "podman import failed: {}\n{INSTALL_HINT}",
            String::from_utf8_lossy(&out.stderr)
        );
        let socket = dir.path().join("podman.sock");
        let mut service = Command::new(&podman);
        base(&mut service);
        let service = service
            .arg("system")
            .arg("service")
            .arg("--time=0")
            .arg(format!("unix://{}", socket.display()))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("service.log")).expect("log"))
            .spawn()
            .expect("start podman system service");
        let engine = Podman {
            dir,
            socket,
            service,
        };
        let start = Instant::now();
        loop {
            if let Ok((200, body)) = engine.request("GET", "/_ping", None).await
                && body == b"OK"
            {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "podman's API service did not answer /_ping within 60s: {}",
                std::fs::read_to_string(engine.dir.path().join("service.log")).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        engine
    }

    pub fn host(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    /// One HTTP/1.1 request to the engine; returns the status and the (unchunked) body.
    pub async fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
    ) -> std::io::Result<(u16, Vec<u8>)> {
        let mut stream = UnixStream::connect(&self.socket).await?;
        let body = body.unwrap_or("");
        let request = format!(
            "{method} {path} HTTP/1.1\r\nHost: podman\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).await?;
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await?;
        let split = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .ok_or_else(|| std::io::Error::other("no header end"))?;
        let head = String::from_utf8_lossy(&raw[..split]).to_string();
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let mut payload = raw[split + 4..].to_vec();
        if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            payload = unchunk(&payload);
        }
        Ok((status, payload))
    }

    /// A JSON answer of the engine.
    pub async fn json(&self, method: &str, path: &str) -> (u16, serde_json::Value) {
        let (status, body) = self
            .request(method, path, None)
            .await
            .expect("engine request");
        let value = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
        (status, value)
    }
}

fn unchunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(line_end) = data.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(String::from_utf8_lossy(&data[..line_end]).trim(), 16)
            .unwrap_or(0);
        if size == 0 {
            break;
        }
        let start = line_end + 2;
        out.extend_from_slice(&data[start..(start + size).min(data.len())]);
        data = &data[(start + size + 2).min(data.len())..];
    }
    out
}

/// A minimal root filesystem: static busybox and its applets as relative links.
fn busybox_rootfs(busybox: &Path, rootfs: &Path) {
    for dir in ["bin", "etc", "tmp", "root", "proc", "sys", "dev"] {
        std::fs::create_dir_all(rootfs.join(dir)).expect("rootfs dir");
    }
    std::fs::copy(busybox, rootfs.join("bin/busybox")).expect("copy busybox");
    let list = Command::new(busybox)
        .arg("--list")
        .output()
        .expect("busybox --list");
    for applet in String::from_utf8_lossy(&list.stdout).lines() {
        if applet != "busybox" && !applet.is_empty() {
            std::os::unix::fs::symlink("busybox", rootfs.join("bin").join(applet))
                .expect("applet link");
        }
    }
    std::fs::write(rootfs.join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n").expect("passwd");
}
