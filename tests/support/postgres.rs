//! A private PostgreSQL cluster per test: `initdb` + `pg_ctl` from the Debian `postgresql`
//! package in a temp dir, listening on a unix socket in that dir and on 127.0.0.1 at a free
//! port, stopped and removed on drop.
//!
//! `initdb` refuses to run as root and CI runs as root, so there the cluster belongs to the
//! `postgres` system user (created by the package), or `nobody`, through `runuser`.

use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

/// How long `pg_ctl` may wait for the server to accept connections (or to stop) on a loaded
/// machine before the test fails with the server's log.
/// PostgreSQL's own default `max_connections`: three instances of hermesd (21 connections
/// each at most, `hermesd::state::postgres::PER_INSTANCE`) and a test's own connections fit.
/// <https://www.postgresql.org/docs/current/runtime-config-connection.html#GUC-MAX-CONNECTIONS>
const DEFAULT_MAX_CONNECTIONS: u32 = 100;

const PG_CTL_WAIT: Duration = Duration::from_secs(120);

/// A running cluster; dropping it stops the server (immediate mode) and removes its files.
#[derive(Debug)]
pub struct PgCluster {
    bin: PathBuf,
    data: PathBuf,
    run_as: Option<String>,
    port: u16,
    // Declared last: removed after the server has stopped.
    dir: tempfile::TempDir,
}

impl PgCluster {
    /// Creates and starts a cluster whose superuser `hermes` connects without a password
    /// (trust authentication: only this test can reach the socket and the loopback port).
    pub fn start() -> Self {
        Self::start_with_max_connections(DEFAULT_MAX_CONNECTIONS)
    }

    /// As [`Self::start`], with the server's `max_connections` at `max_connections`.
    pub fn start_with_max_connections(max_connections: u32) -> Self {
        let bin = binaries();
        let dir = tempfile::Builder::new()
            .prefix("hermes-pg-")
            .tempdir()
            .expect("temp dir for the cluster");
        // The server's user must reach its data dir and socket dir inside our temp dir.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .expect("open the temp dir to the cluster's user");
        let data = dir.path().join("data");
        let run_as = service_user();
        if let Some(user) = &run_as {
            std::fs::create_dir(&data).expect("create the data dir");
            let (uid, gid) = ids_of(user);
            std::os::unix::fs::chown(&data, Some(uid), Some(gid)).expect("chown the data dir");
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid))
                .expect("chown the socket dir");
        }
        let mut cluster = Self {
            bin,
            data,
            run_as,
            port: 0,
            dir,
        };
        let data_arg = cluster.data.display().to_string();
        cluster.run(
            "initdb",
            &[
                "-D",
                &data_arg,
                "-U",
                "hermes",
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C.UTF-8",
                "--no-sync",
            ],
        );
        // The free port is found by binding 127.0.0.1:0 and releasing it; another process may
        // take it in between, so a failed start is retried on a fresh port.
        let mut last_failure = String::new();
        for _ in 0..5 {
            cluster.port = free_port();
            let options = format!(
                "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off \
                 -c synchronous_commit=off -c full_page_writes=off -c max_connections={max_connections}",
                cluster.port,
                cluster.dir.path().display()
            );
            let output = cluster.try_run(
                "pg_ctl",
                &[
                    "start",
                    "-w",
                    "-t",
                    &PG_CTL_WAIT.as_secs().to_string(),
                    "-D",
                    &data_arg,
                    "-l",
                    &cluster.log_path().display().to_string(),
                    "-o",
                    &options,
                ],
            );
            if output.status.success() {
                return cluster;
            }
            last_failure = format!(
                "{}{}\nserver log:\n{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr),
                std::fs::read_to_string(cluster.log_path()).unwrap_or_default()
            );
        }
        panic!("PostgreSQL did not start: {last_failure}");
    }

    /// The URL of the default database over TCP.
    pub fn url(&self) -> String {
        format!("postgres://hermes@127.0.0.1:{}/postgres", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The temp dir holding the data dir, the socket and the server log.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    fn run(&self, tool: &str, args: &[&str]) {
        let output = self.try_run(tool, args);
        assert!(
            output.status.success(),
            "{tool} failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }

    fn try_run(&self, tool: &str, args: &[&str]) -> Output {
        let program = self.bin.join(tool);
        let mut command = match &self.run_as {
            Some(user) => {
                let mut command = Command::new("runuser");
                command.args(["-u", user, "--"]).arg(&program);
                command
            }
            None => Command::new(&program),
        };
        command
            .args(args)
            // Our temp dir is the working directory, readable by the cluster's user.
            .current_dir(self.dir.path())
            .output()
            .unwrap_or_else(|error| panic!("run {}: {error}", program.display()))
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        let data = self.data.display().to_string();
        let wait = PG_CTL_WAIT.as_secs().to_string();
        let _ = self.try_run(
            "pg_ctl",
            &["stop", "-w", "-t", &wait, "-m", "immediate", "-D", &data],
        );
    }
}

/// The newest installed server's `bin` directory (`/usr/lib/postgresql/<major>/bin`).
fn binaries() -> PathBuf {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let major = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").is_file().then_some((major, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin).unwrap_or_else(|| {
        panic!(
            "no PostgreSQL server under /usr/lib/postgresql/*/bin: install the Debian \
             `postgresql` package (.ci/test does)"
        )
    })
}

/// The user the cluster runs as when the test runs as root.
fn service_user() -> Option<String> {
    if !rustix::process::getuid().is_root() {
        return None;
    }
    ["postgres", "nobody"]
        .into_iter()
        .find(|user| id_output(user, "-u").is_some())
        .map(str::to_owned)
        .or_else(|| panic!("running as root and neither `postgres` nor `nobody` exists"))
}

fn ids_of(user: &str) -> (u32, u32) {
    let uid = id_output(user, "-u").expect("uid");
    let gid = id_output(user, "-g").expect("gid");
    (uid, gid)
}

fn id_output(user: &str, flag: &str) -> Option<u32> {
    let output = Command::new("id").args([flag, user]).output().ok()?;
    if !output.status.success() {
        return None;
    }
    String::from_utf8_lossy(&output.stdout).trim().parse().ok()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("find a free port")
}
