//! The service packaging, checked: the shipped and the installed systemd units pass
//! `systemd-analyze verify` and a security threshold, the watchdog and stop timings fit the
//! daemon, the Dockerfile and CI build through the same release script, the dependency
//! skeleton is a valid workspace, compose publishes only on loopback, and `hermesd health`
//! answers for the real admin API.
//!
//! Needs `systemd-analyze` (Debian package `systemd`; .ci/run installs it when absent).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;

const SYSTEM_UNIT: &str = include_str!("../deploy/systemd/hermesd.service");
const USER_UNIT: &str = include_str!("../deploy/systemd/hermesd-user.service");
const DOCKERFILE: &str = include_str!("../Dockerfile");
const CI_RUN: &str = include_str!("../.ci/run");
const CARGO_TOML: &str = include_str!("../Cargo.toml");
const README: &str = include_str!("../README.md");
const CI_TEST: &str = include_str!("../.ci/test");

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn binary() -> PathBuf {
    std::fs::canonicalize(env!("CARGO_BIN_EXE_hermesd")).unwrap()
}

/// `systemd-analyze [--user] ARGS` with a private runtime dir (a user manager needs one).
fn systemd_analyze(user: bool, args: &[&str], runtime_dir: &Path) -> Output {
    let mut command = Command::new("systemd-analyze");
    if user {
        command.arg("--user");
    }
    command
        .args(args)
        .env("XDG_RUNTIME_DIR", runtime_dir)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run systemd-analyze ({e}); run the tests with .ci/test, which installs it"
            )
        })
}

/// Verifies `unit` (saved as `name` in a temp dir): exit 0 and not one complaint about it.
fn verify(user: bool, name: &str, unit: &str) {
    let dir = tempfile::tempdir().unwrap();
    let runtime = dir.path().join("runtime");
    std::fs::create_dir(&runtime).unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, unit).unwrap();
    let output = systemd_analyze(user, &["verify", path.to_str().unwrap()], &runtime);
    let complaints = format!("{}{}", text(&output.stdout), text(&output.stderr));
    assert!(
        output.status.success(),
        "verify failed for {name}:\n{complaints}\n{unit}"
    );
    assert!(
        !complaints.contains(name),
        "systemd-analyze complained about {name}:\n{complaints}"
    );
}

/// The template with its binary path replaced by one that exists (verify checks it).
fn with_real_binary(template: &str) -> String {
    template.replace("/usr/local/bin/hermesd", binary().to_str().unwrap())
}

#[test]
fn the_shipped_units_pass_systemd_analyze_verify() {
    verify(false, "hermesd.service", &with_real_binary(SYSTEM_UNIT));
    verify(true, "hermesd.service", &with_real_binary(USER_UNIT));
}

#[test]
fn the_units_service_install_writes_pass_verify_too() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    for args in [
        &["service", "install", "--dry-run", "--run-as", "hermes"][..],
        &["service", "install", "--dry-run", "--user"][..],
    ] {
        let output = Command::new(binary())
            .args(args)
            .env_clear()
            .env("HERMES_HOME", &home)
            .env("HOME", dir.path())
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", text(&output.stderr));
        verify(
            args.contains(&"--user"),
            "hermesd.service",
            &text(&output.stdout),
        );
    }
}

#[test]
fn the_system_unit_stays_hardened() {
    for directive in [
        "Type=notify",
        "Restart=on-failure",
        "RestartPreventExitStatus=78",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "ProtectHome=yes",
        "ReadWritePaths=/var/lib/hermes",
        "PrivateTmp=yes",
        "CapabilityBoundingSet=",
        "SystemCallFilter=@system-service",
        "MemoryDenyWriteExecute=yes",
        "EnvironmentFile=-/etc/hermesd/hermesd.env",
    ] {
        assert!(
            SYSTEM_UNIT.lines().any(|line| line == directive),
            "hermesd.service lost '{directive}'"
        );
    }
    for directive in ["Type=notify", "NoNewPrivileges=yes", "ProtectSystem=strict"] {
        assert!(
            USER_UNIT.lines().any(|line| line == directive),
            "{directive}"
        );
    }
    // Exposure 2.0 or better ("OK") by systemd's own scoring; it is 1.6 today.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hermesd.service");
    std::fs::write(&path, with_real_binary(SYSTEM_UNIT)).unwrap();
    let output = systemd_analyze(
        false,
        &[
            "security",
            "--offline=yes",
            "--threshold=20",
            path.to_str().unwrap(),
        ],
        dir.path(),
    );
    assert!(
        output.status.success(),
        "{}{}",
        text(&output.stdout),
        text(&output.stderr)
    );
}

/// `Key=<n>s` of a unit, in seconds.
fn seconds(unit: &str, key: &str) -> u64 {
    let value = unit
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key}="));
    value.trim_end_matches('s').parse().unwrap()
}

#[test]
fn watchdog_pings_and_stop_timeout_fit_the_daemon() {
    for unit in [SYSTEM_UNIT, USER_UNIT] {
        let watchdog_sec = seconds(unit, "WatchdogSec");
        // What systemd hands the daemon, and the interval the daemon derives from it.
        let env = [(
            "WATCHDOG_USEC".to_owned(),
            (watchdog_sec * 1_000_000).to_string(),
        )]
        .into_iter()
        .collect();
        let ping = hermesd::gateway::sd_notify::watchdog_interval(&env, 1).expect("interval");
        assert!(
            ping * 2 <= Duration::from_secs(watchdog_sec),
            "{ping:?} vs {watchdog_sec}s"
        );
        // The default drain (agent.restart_drain_timeout = 0) plus 30 s of shutdown.
        let drain = hermesd::config::Config::default()
            .agent
            .restart_drain_timeout_secs;
        assert!(seconds(unit, "TimeoutStopSec") >= (drain + 30).max(60));
    }
}

#[test]
fn the_dockerfile_and_ci_build_with_the_same_script() {
    let builds: Vec<&str> = DOCKERFILE
        .lines()
        .filter(|line| line.contains(".ci/release-build") && !line.starts_with('#'))
        .collect();
    assert!(
        builds
            .iter()
            .any(|line| line.trim() == "RUN .ci/release-build"),
        "the dependency layer: {builds:?}"
    );
    assert!(
        builds
            .iter()
            .any(|line| line.contains("HERMESD_GIT_REV=\"$GIT_REV\" .ci/release-build")),
        "the final build: {builds:?}"
    );
    assert!(
        !DOCKERFILE.contains("cargo build"),
        "the Dockerfile must build via .ci/release-build"
    );
    assert!(
        CI_RUN
            .lines()
            .any(|line| line.trim() == ".ci/release-build")
    );
    assert!(
        !CI_RUN.contains("cargo build --release"),
        "CI must build via .ci/release-build"
    );
    let script = std::fs::read_to_string(repo().join(".ci/release-build")).unwrap();
    assert!(script.contains("exec cargo build --release --locked --bin hermesd"));
    for line in [
        "ENV HERMES_HOME=/data",
        "VOLUME [\"/data\"]",
        "USER hermes",
        "EXPOSE 8642 8643",
        "STOPSIGNAL SIGTERM",
        "    CMD [\"/usr/local/bin/hermesd\", \"health\"]",
        "CMD [\"run\"]",
    ] {
        assert!(
            DOCKERFILE.lines().any(|l| l == line),
            "Dockerfile lost '{line}'"
        );
    }
    // The release profile the script relies on.
    let release = CARGO_TOML
        .split("[profile.release]")
        .nth(1)
        .expect("a release profile");
    assert!(
        release.contains("lto = ") && release.contains("strip = true"),
        "{release}"
    );
}

/// The README's two commands are the whole set-up: its test command is the one CI runs
/// (verbatim), and that command installs what the tests need before running them all.
#[test]
fn ci_runs_the_readme_test_command_which_installs_what_tests_need() {
    let block: Vec<&str> = README
        .split("```sh\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the README opens with a sh block")
        .lines()
        .collect();
    assert_eq!(block.len(), 2, "run and test commands: {block:?}");
    let test_command = block[1].trim();
    assert!(
        CI_RUN.lines().any(|line| line.trim() == test_command),
        ".ci/run must run the README's test command {test_command:?} verbatim"
    );
    assert_eq!(test_command, ".ci/test");
    let mode = std::fs::metadata(repo().join(".ci/test")).unwrap();
    assert!(
        std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o111 != 0,
        ".ci/test must be executable"
    );
    for needed in [
        "command -v systemd-analyze",
        "missing+=(systemd)",
        "missing+=(python3 python3-venv)",
        "apt-get install",
        ".ci/python-reference",
        "exec cargo test --workspace \"$@\"",
    ] {
        assert!(CI_TEST.contains(needed), ".ci/test lost {needed:?}");
    }
    assert!(
        !CI_RUN
            .lines()
            .any(|line| line.trim() == "cargo test --workspace"),
        "CI must test through the README's command, not beside it"
    );
}

#[test]
fn the_dependency_skeleton_is_a_workspace_without_our_code() {
    let dir = tempfile::tempdir().unwrap();
    let skeleton = dir.path().join("skeleton");
    let status = Command::new(repo().join(".ci/dependency-skeleton"))
        .arg(repo())
        .arg(&skeleton)
        .status()
        .unwrap();
    assert!(status.success());
    let output = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--locked",
            "--offline",
            "--format-version",
            "1",
            "--no-deps",
        ])
        .current_dir(&skeleton)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output.stderr));
    let mut stubs = 0;
    for entry in walk(&skeleton) {
        let name = entry.file_name().unwrap().to_str().unwrap().to_owned();
        if name == "Cargo.toml" || name == "Cargo.lock" {
            continue;
        }
        // Build configuration is copied as it is: it can change how dependencies build.
        let relative = entry.strip_prefix(&skeleton).unwrap();
        if relative == Path::new(".cargo/config.toml") || name.starts_with("rust-toolchain") {
            assert_eq!(
                std::fs::read(&entry).unwrap(),
                std::fs::read(repo().join(relative)).unwrap(),
                "{} is copied unchanged",
                relative.display()
            );
            continue;
        }
        let content = std::fs::read_to_string(&entry).unwrap();
        assert!(
            content.is_empty() || content == "fn main() {}\n",
            "{} is not a stub",
            entry.display()
        );
        stubs += 1;
    }
    assert!(skeleton.join("src/main.rs").exists() && skeleton.join("build.rs").exists());
    assert!(stubs >= 4, "{stubs}");
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[test]
fn compose_publishes_on_loopback_with_a_named_volume() {
    let text = std::fs::read_to_string(repo().join("deploy/compose.yaml")).unwrap();
    let compose: serde_json::Value = serde_norway::from_str(&text).unwrap();
    let service = &compose["services"]["hermesd"];
    for port in service["ports"].as_array().unwrap() {
        assert!(port.as_str().unwrap().starts_with("127.0.0.1:"), "{port}");
    }
    assert_eq!(service["volumes"][0], "hermes-data:/data");
    assert!(compose["volumes"].get("hermes-data").is_some());
    assert_eq!(service["env_file"][0], "hermesd.env");
    assert_eq!(service["restart"], "unless-stopped");
    assert_eq!(service["healthcheck"]["test"][2], "health");
    let grace: u64 = service["stop_grace_period"]
        .as_str()
        .unwrap()
        .trim_end_matches('s')
        .parse()
        .unwrap();
    assert!(grace >= seconds(SYSTEM_UNIT, "TimeoutStopSec"));
}

fn health(home: &Path, args: &[&str]) -> Output {
    Command::new(binary())
        .arg("health")
        .args(args)
        .env_clear()
        .env("HERMES_HOME", home)
        .output()
        .unwrap()
}

#[test]
fn health_answers_for_the_real_admin_api() {
    use hermesd::gateway::adapter_health::AdapterHealth;
    use hermesd::gateway::admin::{AdminCredentials, AdminState, serve_admin};
    use hermesd::gateway::metrics::GatewayMetrics;

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let state = AdminState {
        metrics: Arc::new(GatewayMetrics::new()),
        adapters: Arc::new(AdapterHealth::new()),
        store: None,
        log: None,
        router: None,
        credentials: AdminCredentials::none(),
    };
    let (addr, server) = runtime
        .block_on(serve_admin(
            "127.0.0.1:0".parse().unwrap(),
            state,
            shutdown.clone(),
        ))
        .expect("admin API listens");
    let dir = tempfile::tempdir().unwrap();
    // The address comes from the same config the daemon reads.
    std::fs::write(
        dir.path().join("config.yaml"),
        format!("admin:\n  host: 127.0.0.1\n  port: {}\n", addr.port()),
    )
    .unwrap();
    let up = health(dir.path(), &[]);
    assert_eq!(up.status.code(), Some(0), "{}", text(&up.stderr));
    assert!(text(&up.stdout).contains("healthy"));

    shutdown.cancel();
    runtime.block_on(server).unwrap().unwrap();
    let down = health(dir.path(), &[]);
    assert_eq!(down.status.code(), Some(1));
    assert!(
        text(&down.stderr).contains("unhealthy"),
        "{}",
        text(&down.stderr)
    );
}

#[test]
fn health_fails_on_an_error_status() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let server = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let (mut stream, _) = listener.accept().unwrap();
        stream.set_nodelay(true).unwrap();
        let mut request = [0u8; 1024];
        let _ = stream.read(&mut request).unwrap();
        stream
            .write_all(b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n")
            .unwrap();
    });
    let dir = tempfile::tempdir().unwrap();
    let output = health(dir.path(), &["--addr", &addr]);
    server.join().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(
        text(&output.stderr).contains("answered 503"),
        "{}",
        text(&output.stderr)
    );
}

/// `docker-compose config` (the Debian `docker-compose` package; .ci/test installs it) on a
/// copy of `dir` with an empty `hermesd.env`, returning the resolved file. It needs no engine.
fn resolved_compose(dir: &Path, file: &str) -> serde_json::Value {
    let copy = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        std::fs::copy(entry.path(), copy.path().join(entry.file_name())).unwrap();
    }
    std::fs::write(copy.path().join("hermesd.env"), "").unwrap();
    let output = Command::new("docker-compose")
        .arg("-f")
        .arg(copy.path().join(file))
        .arg("config")
        .env("POSTGRES_PASSWORD", "compose-check")
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run docker-compose ({e}); run the tests with .ci/test, which installs it"
            )
        });
    assert!(
        output.status.success(),
        "docker-compose config rejected {file}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_norway::from_slice(&output.stdout).unwrap()
}

#[test]
fn the_cluster_compose_file_validates_and_every_instance_shares_one_database() {
    let dir = repo().join("deploy/cluster");
    let compose = resolved_compose(&dir, "compose.yaml");
    let services = compose["services"].as_object().unwrap();
    let instances: Vec<&str> = services
        .keys()
        .map(String::as_str)
        .filter(|name| name.starts_with("hermesd-"))
        .collect();
    assert_eq!(instances.len(), 3, "{instances:?}");
    let mut ids = std::collections::BTreeSet::new();
    for name in &instances {
        let service = &services[*name];
        let env = &service["environment"];
        assert_eq!(
            env["HERMES_DATABASE_URL"], "postgres://hermes:compose-check@postgres:5432/hermes",
            "{name}"
        );
        assert!(
            ids.insert(
                env["HERMES__STATE__INSTANCE_ID"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            )
        );
        assert!(
            service.get("ports").is_none(),
            "{name} is reached through the balancer only"
        );
        let volumes: Vec<&str> = service["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert!(
            volumes.iter().any(|v| v.ends_with(":/data/config.yaml:ro")),
            "{name}: {volumes:?}"
        );
        assert!(service["depends_on"].get("postgres").is_some(), "{name}");
    }
    for port in services["balancer"]["ports"].as_array().unwrap() {
        assert!(port.as_str().unwrap().starts_with("127.0.0.1:"), "{port}");
    }
    // The balancer sends the API and Telegram's webhook to every instance.
    let nginx = std::fs::read_to_string(dir.join("nginx.conf")).unwrap();
    for name in &instances {
        for port in ["8642", "8443"] {
            assert!(
                nginx.contains(&format!("server {name}:{port}")),
                "nginx.conf misses {name}:{port}"
            );
        }
    }
    let config: serde_json::Value =
        serde_norway::from_str(&std::fs::read_to_string(dir.join("config.yaml")).unwrap()).unwrap();
    assert_eq!(config["state"]["backend"], "postgres");
    assert!(
        config["state"].get("postgres_url").is_none(),
        "the URL holds a password: it belongs in the environment"
    );
    // hermesd itself accepts the shared config with the instances' environment.
    let home = tempfile::tempdir().unwrap();
    std::fs::copy(dir.join("config.yaml"), home.path().join("config.yaml")).unwrap();
    let env = &services["hermesd-1"]["environment"];
    let check = Command::new(env!("CARGO_BIN_EXE_hermesd"))
        .args(["config", "check"])
        .env_clear()
        .env("HOME", home.path())
        .env("HERMES_HOME", home.path())
        .env(
            "HERMES_DATABASE_URL",
            env["HERMES_DATABASE_URL"].as_str().unwrap(),
        )
        .env(
            "HERMES__STATE__INSTANCE_ID",
            env["HERMES__STATE__INSTANCE_ID"].as_str().unwrap(),
        )
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "hermesd config check refused deploy/cluster/config.yaml: {}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
}
