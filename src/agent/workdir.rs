//! The directory the agent's commands start in and its project context files
//! (`AGENTS.md`, `.hermes.md`, ...) are found from. `terminal.cwd` when set; otherwise, for the
//! gateway, `MESSAGING_CWD` or the home directory of the user the daemon runs as, as Hermes's
//! gateway resolves it (a service's process directory is `/` or arbitrary, never the
//! person's project), and for `hermesd chat` the directory it was started in.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::config::{TerminalBackend, TerminalConfig};
use crate::home::HermesHome;

/// Fills an unset `terminal.cwd` the way Hermes's gateway does: on the local backend,
/// `MESSAGING_CWD` or `HOME`; on docker with `docker_mount_cwd_to_workspace`, `MESSAGING_CWD`
/// (the host directory mounted at `/workspace`); otherwise left to the backend.
pub fn resolve_for_gateway(terminal: &mut TerminalConfig, env: &BTreeMap<String, String>) {
    if terminal.cwd.is_some() {
        return;
    }
    let messaging = env
        .get("MESSAGING_CWD")
        .map(|v| v.trim())
        .filter(|v| !v.is_empty() && !matches!(*v, "." | "auto" | "cwd"))
        .map(str::to_owned);
    terminal.cwd = match terminal.backend {
        // A home that does not exist (a service user without one) leaves the process
        // directory in place, quietly: nothing was configured.
        TerminalBackend::Local => messaging.or_else(|| {
            env.get("HOME")
                .filter(|h| !h.is_empty())
                .cloned()
                .or_else(|| std::env::home_dir().map(|h| h.display().to_string()))
                .filter(|h| Path::new(h).is_dir())
        }),
        TerminalBackend::Docker if terminal.docker.mount_cwd_to_workspace => messaging,
        _ => None,
    };
}

/// The host directory the agent starts in: `terminal.cwd` on the local backend when it is an
/// existing absolute directory (an unusable one is reported), else the process directory.
pub fn starting_dir(terminal: &TerminalConfig, home: &HermesHome) -> PathBuf {
    let process_dir = || std::env::current_dir().unwrap_or_else(|_| home.path().to_path_buf());
    let configured = match (&terminal.backend, &terminal.cwd) {
        (TerminalBackend::Local, Some(cwd)) => Path::new(cwd),
        (TerminalBackend::Docker, Some(cwd)) if terminal.docker.mount_cwd_to_workspace => {
            Path::new(cwd)
        }
        _ => return process_dir(),
    };
    if configured.is_absolute() && configured.is_dir() {
        return configured.to_path_buf();
    }
    let fallback = process_dir();
    tracing::warn!(
        configured = %configured.display(),
        using = %fallback.display(),
        "terminal.cwd is not an existing absolute directory; commands start elsewhere"
    );
    fallback
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

    #[test]
    fn the_gateway_starts_in_messaging_cwd_or_home_unless_terminal_cwd_says() {
        let home = tempfile::tempdir().unwrap();
        let home = home.path().display().to_string();
        let mut t = TerminalConfig::default();
        resolve_for_gateway(&mut t, &env(&[("HOME", &home)]));
        assert_eq!(t.cwd.as_deref(), Some(home.as_str()));

        let mut t = TerminalConfig::default();
        resolve_for_gateway(&mut t, &env(&[("HOME", "/nonexistent/ann")]));
        assert_eq!(t.cwd, None, "a missing home leaves the process directory");

        let mut t = TerminalConfig::default();
        resolve_for_gateway(
            &mut t,
            &env(&[("HOME", "/home/ann"), ("MESSAGING_CWD", "/srv/p")]),
        );
        assert_eq!(t.cwd.as_deref(), Some("/srv/p"));

        let mut t = TerminalConfig {
            cwd: Some("/opt/x".to_owned()),
            ..TerminalConfig::default()
        };
        resolve_for_gateway(&mut t, &env(&[("HOME", "/home/ann")]));
        assert_eq!(t.cwd.as_deref(), Some("/opt/x"));

        let mut t = TerminalConfig {
            backend: TerminalBackend::Ssh,
            ..TerminalConfig::default()
        };
        resolve_for_gateway(&mut t, &env(&[("HOME", "/home/ann")]));
        assert_eq!(t.cwd, None, "a remote backend keeps its own default");
    }

    #[test]
    fn an_unusable_terminal_cwd_falls_back_to_the_process_directory() {
        let dir = tempfile::tempdir().unwrap();
        let home = HermesHome::at(dir.path().join("home"));
        let t = TerminalConfig {
            cwd: Some(dir.path().display().to_string()),
            ..TerminalConfig::default()
        };
        assert_eq!(starting_dir(&t, &home), dir.path());
        let t = TerminalConfig {
            cwd: Some(dir.path().join("missing").display().to_string()),
            ..TerminalConfig::default()
        };
        assert_eq!(starting_dir(&t, &home), std::env::current_dir().unwrap());
    }
}
