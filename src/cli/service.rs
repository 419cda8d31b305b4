//! `hermesd service install|uninstall [--user]`: writes the systemd unit for the running
//! binary and the resolved home, then `systemctl daemon-reload` and `enable --now`; the
//! reverse removes it. `--dry-run` prints the unit and the plan and changes nothing.
//!
//! Two variables exist for tests and unusual systems: `HERMESD_UNIT_DIR` (where the unit is
//! written) and `SYSTEMCTL` (the systemctl program to run).

mod unit;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use clap::Subcommand;

use super::EXIT_FAILURE;
use crate::config;
use crate::home::HermesHome;

#[derive(Debug, Subcommand)]
pub enum ServiceCommand {
    /// Write the unit for this binary and home, then daemon-reload and enable --now.
    Install(InstallArgs),
    /// Stop and disable the unit, remove it, daemon-reload.
    Uninstall(UninstallArgs),
}

#[derive(Debug, clap::Args)]
pub struct InstallArgs {
    /// A user unit (`systemctl --user`) instead of a system unit.
    #[arg(long)]
    pub user: bool,
    /// Print the unit and what would be done; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// System units: the account the daemon runs as (default: $SUDO_USER, else $USER).
    #[arg(long, value_name = "USER")]
    pub run_as: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct UninstallArgs {
    /// The user unit (`systemctl --user`).
    #[arg(long)]
    pub user: bool,
    /// Print what would be done; change nothing.
    #[arg(long)]
    pub dry_run: bool,
}

pub fn run(home: &HermesHome, env: &BTreeMap<String, String>, command: ServiceCommand) -> i32 {
    let result = match command {
        ServiceCommand::Install(args) => install(home, env, &args),
        ServiceCommand::Uninstall(args) => uninstall(home, env, &args),
    };
    match result {
        Ok(()) => 0,
        Err(message) => {
            eprintln!("error: {message}");
            EXIT_FAILURE
        }
    }
}

/// Why installing or removing the unit stopped; printed after `error: ` for the operator.
#[derive(Debug, thiserror::Error)]
enum ServiceError {
    #[error(transparent)]
    UnitPath(#[from] unit::UnitPathError),
    #[error("cannot find the user unit directory: neither XDG_CONFIG_HOME nor HOME is set")]
    NoUserUnitDir,
    #[error("cannot find the hermesd binary's path: {0}")]
    NoBinaryPath(#[source] std::io::Error),
    #[error("this hermesd binary was replaced on disk; run the new one")]
    BinaryReplaced,
    #[error(
        "{} does not exist: create it first (mode 0700, owned by the account the service \
         runs as)",
        .0.display()
    )]
    NoHome(PathBuf),
    #[error(
        "refusing to run the gateway as root: pass --run-as USER (an account that owns the \
         home), or install a user unit with --user"
    )]
    WouldRunAsRoot,
    #[error("cannot run '{command}': {source}")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("'{command}' failed ({status})")]
    CommandFailed {
        command: String,
        status: std::process::ExitStatus,
    },
    /// A file step on `path`; `action` is the verb (create, write, remove, resolve).
    #[error("cannot {action} {}: {source}", path.display())]
    File {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn file_error(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> ServiceError {
    let path = path.to_path_buf();
    move |source| ServiceError::File {
        action,
        path,
        source,
    }
}

/// Where the unit goes and how systemctl is called, for one `--user` choice.
struct Target {
    user: bool,
    unit_name: String,
    unit_path: PathBuf,
    systemctl: String,
}

impl Target {
    fn new(
        home: &HermesHome,
        env: &BTreeMap<String, String>,
        user: bool,
    ) -> Result<Self, ServiceError> {
        let unit_name = match home.profile() {
            Some(profile) => format!("hermesd-{profile}.service"),
            None => "hermesd.service".to_owned(),
        };
        let dir = unit_dir(env, user)?;
        Ok(Self {
            user,
            unit_path: dir.join(&unit_name),
            unit_name,
            systemctl: non_empty(env, "SYSTEMCTL")
                .unwrap_or("systemctl")
                .to_owned(),
        })
    }

    fn describe(&self, args: &[&str]) -> String {
        let scope = if self.user { " --user" } else { "" };
        format!("{}{scope} {}", self.systemctl, args.join(" "))
    }

    /// Runs `systemctl [--user] ARGS`, inheriting stdio so its messages reach the operator.
    fn systemctl(&self, args: &[&str]) -> Result<(), ServiceError> {
        let mut command = Command::new(&self.systemctl);
        if self.user {
            command.arg("--user");
        }
        let status = command
            .args(args)
            .status()
            .map_err(|source| ServiceError::Spawn {
                command: self.describe(args),
                source,
            })?;
        if status.success() {
            Ok(())
        } else {
            Err(ServiceError::CommandFailed {
                command: self.describe(args),
                status,
            })
        }
    }
}

fn non_empty<'a>(env: &'a BTreeMap<String, String>, name: &str) -> Option<&'a str> {
    env.get(name).map(String::as_str).filter(|v| !v.is_empty())
}

fn unit_dir(env: &BTreeMap<String, String>, user: bool) -> Result<PathBuf, ServiceError> {
    if let Some(dir) = non_empty(env, "HERMESD_UNIT_DIR") {
        return Ok(PathBuf::from(dir));
    }
    if !user {
        return Ok(PathBuf::from("/etc/systemd/system"));
    }
    let config_home = non_empty(env, "XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| non_empty(env, "HOME").map(|home| Path::new(home).join(".config")))
        .ok_or(ServiceError::NoUserUnitDir)?;
    Ok(config_home.join("systemd").join("user"))
}

fn install(
    home: &HermesHome,
    env: &BTreeMap<String, String>,
    args: &InstallArgs,
) -> Result<(), ServiceError> {
    let target = Target::new(home, env, args.user)?;
    let binary = std::env::current_exe().map_err(ServiceError::NoBinaryPath)?;
    if binary.to_string_lossy().ends_with(" (deleted)") {
        return Err(ServiceError::BinaryReplaced);
    }
    let home_path = absolute(home.path())?;
    // ReadWritePaths= must name an existing directory, or the unit cannot start.
    if !args.dry_run && !home_path.is_dir() {
        return Err(ServiceError::NoHome(home_path));
    }
    let run_as = if args.user {
        None
    } else {
        Some(run_as_account(args.run_as.as_deref(), env)?)
    };
    let drain_timeout_secs = match config::load(home, env) {
        Ok(loaded) => loaded.config.agent.restart_drain_timeout_secs,
        Err(errors) => {
            eprintln!(
                "warning: the configuration does not load yet; the service will exit 78 until \
                 it does (see `hermesd doctor`):\n{}",
                crate::logging::mask(&errors.to_string())
            );
            0
        }
    };
    let text = unit::render(&unit::UnitParams {
        user_unit: args.user,
        binary: &binary,
        home: &home_path,
        run_as: run_as.as_deref(),
        drain_timeout_secs,
    })?;
    let steps = [
        vec!["daemon-reload"],
        vec!["enable", "--now", target.unit_name.as_str()],
    ];
    if args.dry_run {
        print!("{text}");
        eprintln!("dry run: would write {}", target.unit_path.display());
        for step in &steps {
            eprintln!("dry run: would run {}", target.describe(step));
        }
        return Ok(());
    }
    write_unit(&target.unit_path, &text)?;
    println!("wrote {}", target.unit_path.display());
    for step in &steps {
        target.systemctl(step)?;
    }
    let scope = if args.user { " --user" } else { "" };
    println!(
        "{} is enabled and started; see `systemctl{scope} status {}` and `hermesd doctor`",
        target.unit_name, target.unit_name
    );
    Ok(())
}

fn uninstall(
    home: &HermesHome,
    env: &BTreeMap<String, String>,
    args: &UninstallArgs,
) -> Result<(), ServiceError> {
    let target = Target::new(home, env, args.user)?;
    if !target.unit_path.exists() {
        println!(
            "{} is not installed ({} does not exist)",
            target.unit_name,
            target.unit_path.display()
        );
        return Ok(());
    }
    let disable = ["disable", "--now", target.unit_name.as_str()];
    if args.dry_run {
        eprintln!("dry run: would run {}", target.describe(&disable));
        eprintln!("dry run: would remove {}", target.unit_path.display());
        eprintln!("dry run: would run {}", target.describe(&["daemon-reload"]));
        return Ok(());
    }
    // A unit that is already stopped or unknown to a dead manager must still be removable:
    // report a failed disable, finish the removal, and fail at the end.
    let disabled = target.systemctl(&disable);
    std::fs::remove_file(&target.unit_path).map_err(file_error("remove", &target.unit_path))?;
    println!("removed {}", target.unit_path.display());
    target.systemctl(&["daemon-reload"])?;
    disabled
}

fn absolute(path: &Path) -> Result<PathBuf, ServiceError> {
    if path.is_absolute() {
        return Ok(path.to_path_buf());
    }
    std::env::current_dir()
        .map(|cwd| cwd.join(path))
        .map_err(file_error("resolve", path))
}

/// The account a system unit runs as; never root unless asked for by name.
fn run_as_account(
    explicit: Option<&str>,
    env: &BTreeMap<String, String>,
) -> Result<String, ServiceError> {
    if let Some(user) = explicit.filter(|u| !u.is_empty()) {
        return Ok(user.to_owned());
    }
    match non_empty(env, "SUDO_USER").or_else(|| non_empty(env, "USER")) {
        Some("root") | None => Err(ServiceError::WouldRunAsRoot),
        Some(user) => Ok(user.to_owned()),
    }
}

/// Writes the unit atomically (temporary file + rename), mode 0644 as systemd expects.
fn write_unit(path: &Path, text: &str) -> Result<(), ServiceError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(file_error("create", dir))?;
    let temporary = path.with_extension("service.tmp");
    let write = || -> std::io::Result<()> {
        std::fs::write(&temporary, text)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&temporary, std::fs::Permissions::from_mode(0o644))?;
        }
        std::fs::rename(&temporary, path)
    };
    write().map_err(|source| {
        let _ = std::fs::remove_file(&temporary);
        ServiceError::File {
            action: "write",
            path: path.to_path_buf(),
            source,
        }
    })
}
