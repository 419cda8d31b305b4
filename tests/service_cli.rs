//! End-to-end: `hermesd service install|uninstall [--user] [--dry-run]` with the unit
//! directory redirected (`HERMESD_UNIT_DIR`) and `SYSTEMCTL` pointing at a recording fake, so
//! the real file writing and the exact systemctl calls are checked without systemd.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

struct Sandbox {
    _dir: tempfile::TempDir,
    home: PathBuf,
    unit_dir: PathBuf,
    systemctl: PathBuf,
    calls: PathBuf,
}

/// A temp dir with a Hermes home, an empty unit dir and a fake systemctl that appends its
/// arguments, one call per line, to `calls` and exits with `exit_code`.
fn sandbox(exit_code: i32) -> Sandbox {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("srv").join("hermes");
    std::fs::create_dir_all(&home).unwrap();
    let unit_dir = dir.path().join("units");
    let calls = dir.path().join("systemctl.calls");
    let systemctl = dir.path().join("fake-systemctl");
    std::fs::write(
        &systemctl,
        format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\nexit {exit_code}\n",
            calls.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&systemctl, std::fs::Permissions::from_mode(0o755)).unwrap();
    Sandbox {
        _dir: dir,
        home,
        unit_dir,
        systemctl,
        calls,
    }
}

impl Sandbox {
    fn hermesd(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_hermesd"))
            .args(args)
            .env_clear()
            .env("HOME", self.home.parent().unwrap())
            .env("HERMES_HOME", &self.home)
            .env("USER", "alice")
            .env("HERMESD_UNIT_DIR", &self.unit_dir)
            .env("SYSTEMCTL", &self.systemctl)
            .output()
            .expect("hermesd runs")
    }

    fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(&self.calls)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn unit(&self) -> PathBuf {
        self.unit_dir.join("hermesd.service")
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn binary() -> PathBuf {
    std::fs::canonicalize(env!("CARGO_BIN_EXE_hermesd")).unwrap()
}

fn assert_unit_for(unit: &str, home: &Path) {
    let exec = format!(
        "\nExecStart={} --home {} run\n",
        binary().display(),
        home.display()
    );
    assert!(unit.contains(&exec), "no '{exec}' in:\n{unit}");
    assert!(unit.contains(&format!("\nEnvironment=HERMES_HOME={}\n", home.display())));
    assert!(unit.contains(&format!("\nReadWritePaths={}\n", home.display())));
    assert!(unit.contains("\nType=notify\n"));
    assert!(unit.contains("\nRestartPreventExitStatus=78\n"));
}

#[test]
fn dry_run_prints_the_unit_and_changes_nothing() {
    let sandbox = sandbox(0);
    let output = sandbox.hermesd(&["service", "install", "--dry-run"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let unit = text(&output.stdout);
    assert_unit_for(&unit, &sandbox.home);
    assert!(unit.contains("\nUser=alice\n"), "{unit}");
    assert!(unit.contains("\nWantedBy=multi-user.target\n"));
    let plan = text(&output.stderr);
    assert!(
        plan.contains(&format!("would write {}", sandbox.unit().display())),
        "{plan}"
    );
    assert!(plan.contains("daemon-reload") && plan.contains("enable --now hermesd.service"));
    assert!(!sandbox.unit_dir.exists(), "dry run wrote the unit dir");
    assert!(sandbox.calls().is_empty(), "{:?}", sandbox.calls());
}

#[test]
fn install_writes_the_unit_then_reloads_and_enables() {
    let sandbox = sandbox(0);
    let output = sandbox.hermesd(&["service", "install"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let unit = std::fs::read_to_string(sandbox.unit()).expect("unit written");
    assert_unit_for(&unit, &sandbox.home);
    let mode = std::fs::metadata(sandbox.unit())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o644);
    assert_eq!(
        sandbox.calls(),
        ["daemon-reload", "enable --now hermesd.service"]
    );
    // Exactly the dry run's unit.
    let dry = sandbox.hermesd(&["service", "install", "--dry-run"]);
    assert_eq!(text(&dry.stdout), unit);
}

#[test]
fn user_install_and_uninstall_use_systemctl_user() {
    let sandbox = sandbox(0);
    let output = sandbox.hermesd(&["service", "install", "--user"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let unit = std::fs::read_to_string(sandbox.unit()).unwrap();
    assert_unit_for(&unit, &sandbox.home);
    assert!(!unit.contains("\nUser="), "{unit}");
    assert!(unit.contains("\nWantedBy=default.target\n"));

    let output = sandbox.hermesd(&["service", "uninstall", "--user"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert!(!sandbox.unit().exists());
    assert_eq!(
        sandbox.calls(),
        [
            "--user daemon-reload",
            "--user enable --now hermesd.service",
            "--user disable --now hermesd.service",
            "--user daemon-reload",
        ]
    );
    // Uninstalling again is a no-op that says so.
    let again = sandbox.hermesd(&["service", "uninstall", "--user"]);
    assert_eq!(again.status.code(), Some(0));
    assert!(text(&again.stdout).contains("is not installed"));
    assert_eq!(sandbox.calls().len(), 4);
}

#[test]
fn a_profile_gets_its_own_unit_name() {
    let sandbox = sandbox(0);
    let root = sandbox.home.clone();
    std::fs::create_dir_all(root.join("profiles").join("coder")).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_hermesd"))
        .args(["-p", "coder", "service", "install", "--user"])
        .env_clear()
        .env("HOME", root.parent().unwrap())
        .env("HERMES_HOME", &root)
        .env("HERMESD_UNIT_DIR", &sandbox.unit_dir)
        .env("SYSTEMCTL", &sandbox.systemctl)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let unit = std::fs::read_to_string(sandbox.unit_dir.join("hermesd-coder.service")).unwrap();
    assert_unit_for(&unit, &root.join("profiles").join("coder"));
    assert_eq!(
        sandbox.calls()[1],
        "--user enable --now hermesd-coder.service"
    );
}

#[test]
fn a_failing_systemctl_fails_the_command_and_says_which_call() {
    let sandbox = sandbox(3);
    let output = sandbox.hermesd(&["service", "install"]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = text(&output.stderr);
    assert!(stderr.contains("daemon-reload' failed"), "{stderr}");
    // The unit stays written so the operator can fix systemd and enable it by hand.
    assert!(sandbox.unit().exists());
    assert_eq!(sandbox.calls(), ["daemon-reload"]);
}

#[test]
fn a_system_unit_refuses_to_run_as_root_unless_asked() {
    let sandbox = sandbox(0);
    let output = Command::new(env!("CARGO_BIN_EXE_hermesd"))
        .args(["service", "install", "--dry-run"])
        .env_clear()
        .env("HERMES_HOME", &sandbox.home)
        .env("USER", "root")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(
        text(&output.stderr).contains("--run-as"),
        "{}",
        text(&output.stderr)
    );
    let named = sandbox.hermesd(&["service", "install", "--dry-run", "--run-as", "hermes"]);
    assert!(text(&named.stdout).contains("\nUser=hermes\n"));
}

#[test]
fn install_refuses_a_home_that_does_not_exist() {
    let sandbox = sandbox(0);
    std::fs::remove_dir(&sandbox.home).unwrap();
    let output = sandbox.hermesd(&["service", "install", "--user"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        text(&output.stderr).contains("does not exist"),
        "{}",
        text(&output.stderr)
    );
    assert!(!sandbox.unit().exists());
    assert!(sandbox.calls().is_empty());
}
