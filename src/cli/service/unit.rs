//! Rendering the systemd unit for one binary and home from the shipped templates in
//! `deploy/systemd/`. The templates are compiled in, so `hermesd service install` writes
//! exactly the unit CI verified, with only the per-install lines replaced.

use std::path::{Path, PathBuf};

/// The system unit template (`deploy/systemd/hermesd.service`).
pub const SYSTEM_TEMPLATE: &str = include_str!("../../../deploy/systemd/hermesd.service");
/// The user unit template (`deploy/systemd/hermesd-user.service`).
pub const USER_TEMPLATE: &str = include_str!("../../../deploy/systemd/hermesd-user.service");

/// Where the installed gateway must stop: `agent.restart_drain_timeout` plus 30 s for the
/// rest of shutdown, never under 60 s (the Python Hermes unit's rule).
pub fn stop_timeout_secs(drain_timeout_secs: u64) -> u64 {
    drain_timeout_secs.saturating_add(30).max(60)
}

/// What varies between installations.
#[derive(Debug, Clone)]
pub struct UnitParams<'a> {
    pub user_unit: bool,
    pub binary: &'a Path,
    pub home: &'a Path,
    /// System units only: the account the daemon runs as.
    pub run_as: Option<&'a str>,
    pub drain_timeout_secs: u64,
}

/// The unit text: the template with `ExecStart`, `HERMES_HOME`, `WorkingDirectory`,
/// `ReadWritePaths`, `TimeoutStopSec` (and `User` for a system unit) set for this install.
/// A home under `/home`, `/root` or `/run/user` needs `ProtectHome=read-only` (with the home
/// itself writable) instead of hiding every home directory. The home is passed as `--home`
/// too, so a profile's home is used as is.
pub fn render(params: &UnitParams<'_>) -> Result<String, UnitPathError> {
    let template = if params.user_unit {
        USER_TEMPLATE
    } else {
        SYSTEM_TEMPLATE
    };
    let home = systemd_path(params.home)?;
    let exec = format!("{} --home {home} run", systemd_path(params.binary)?);
    let home_in_user_area = ["/home", "/root", "/run/user"]
        .iter()
        .any(|area| params.home.starts_with(area));
    let mut out = String::with_capacity(template.len() + 128);
    for line in template.lines() {
        let key = line.split_once('=').map(|(key, _)| key.trim());
        let replaced = match key {
            _ if line.starts_with('#') => None,
            Some("ExecStart") => Some(format!("ExecStart={exec}")),
            Some("Environment") if line.contains("HERMES_HOME=") => {
                Some(format!("Environment=HERMES_HOME={home}"))
            }
            Some("WorkingDirectory") => Some(format!("WorkingDirectory={home}")),
            Some("ReadWritePaths") => Some(format!("ReadWritePaths={home}")),
            Some("TimeoutStopSec") => Some(format!(
                "TimeoutStopSec={}s",
                stop_timeout_secs(params.drain_timeout_secs)
            )),
            Some("User") => params.run_as.map(|user| format!("User={user}")),
            Some("ProtectHome") if home_in_user_area => Some("ProtectHome=read-only".to_owned()),
            _ => None,
        };
        out.push_str(replaced.as_deref().unwrap_or(line));
        out.push('\n');
    }
    Ok(out)
}

/// A path a unit file cannot name as it is.
#[derive(Debug, thiserror::Error)]
pub enum UnitPathError {
    #[error("{} is not valid UTF-8", .0.display())]
    NotUtf8(PathBuf),
    #[error("{} is not an absolute path", .0.display())]
    Relative(PathBuf),
    #[error(
        "{} contains whitespace, quotes or backslashes, which a unit file cannot hold \
         safely; move it to a plain path",
        .0.display()
    )]
    NeedsQuoting(PathBuf),
}

/// A path as a unit file value, `%` doubled because systemd expands specifiers. Whitespace,
/// quotes and backslashes would need per-directive quoting rules, so they are refused.
fn systemd_path(path: &Path) -> Result<String, UnitPathError> {
    let text = path
        .to_str()
        .ok_or_else(|| UnitPathError::NotUtf8(path.to_path_buf()))?;
    if !path.is_absolute() {
        return Err(UnitPathError::Relative(path.to_path_buf()));
    }
    if text
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '"' | '\'' | '\\'))
    {
        return Err(UnitPathError::NeedsQuoting(path.to_path_buf()));
    }
    Ok(text.replace('%', "%%"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params<'a>(user_unit: bool, home: &'a Path) -> UnitParams<'a> {
        UnitParams {
            user_unit,
            binary: Path::new("/opt/hermes%/hermesd"),
            home,
            run_as: Some("alice"),
            drain_timeout_secs: 45,
        }
    }

    #[test]
    fn a_system_unit_for_a_home_under_var_lib() {
        let unit = render(&params(false, Path::new("/var/lib/hermes"))).unwrap();
        assert!(unit.contains("\nExecStart=/opt/hermes%%/hermesd --home /var/lib/hermes run\n"));
        assert!(unit.contains("\nEnvironment=HERMES_HOME=/var/lib/hermes\n"));
        assert!(unit.contains("\nReadWritePaths=/var/lib/hermes\n"));
        assert!(unit.contains("\nUser=alice\n"));
        assert!(unit.contains("\nTimeoutStopSec=75s\n"));
        assert!(unit.contains("\nProtectHome=yes\n"));
        assert!(unit.contains("\nStateDirectory=hermes\n"));
        assert!(unit.contains("\nRestartPreventExitStatus=78\n"));
    }

    #[test]
    fn a_home_in_a_user_directory_is_made_writable_not_hidden() {
        let unit = render(&params(false, Path::new("/home/alice/.hermes"))).unwrap();
        assert!(unit.contains("\nProtectHome=read-only\n"));
        assert!(unit.contains("\nReadWritePaths=/home/alice/.hermes\n"));
        // The token locks stay in the writable state directory.
        assert!(unit.contains("\nStateDirectory=hermes\n"));
        assert!(unit.contains("\nEnvironment=XDG_STATE_HOME=%S\n"));
    }

    #[test]
    fn a_user_unit_keeps_its_own_settings() {
        let unit = render(&params(true, Path::new("/home/alice/.hermes"))).unwrap();
        assert!(unit.contains("\nWantedBy=default.target\n"));
        assert!(!unit.contains("\nUser="));
        assert!(unit.contains("\nTimeoutStopSec=75s\n"));
        assert_eq!(stop_timeout_secs(0), 60);
    }

    #[test]
    fn paths_a_unit_cannot_hold_are_refused() {
        let error = render(&params(false, Path::new("/srv/my hermes")))
            .unwrap_err()
            .to_string();
        assert!(error.contains("/srv/my hermes"), "{error}");
        assert!(render(&params(false, Path::new("relative/home"))).is_err());
    }
}
