//! The places on disk whose contents decide who controls this machine or this daemon, in one
//! list for every tool: the file tools (`write_file`, `patch`, `read_file`, `search_files`)
//! and the terminal's approval check (a `>`, `tee`, `cp`, `dd of=` … into one of them) ask
//! the same question here, so the two can never disagree. SECURITY.md explains the list.
//!
//! Paths are judged lexically (after `..` and `.` are folded away); callers that can resolve
//! symlinks pass the resolved path too.

use std::path::{Component, Path, PathBuf};

/// One protected place, and why it is protected. `key` is stable (tests and logs use it);
/// `what` completes the sentence "… is …".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Guarded {
    pub key: &'static str,
    pub what: &'static str,
}

/// Where the protected places are for one tool call: the user's home directory (the tool
/// environment's `HOME`) and the Hermes home.
#[derive(Debug, Clone)]
pub struct Places {
    user_home: Option<PathBuf>,
    hermes_homes: Vec<PathBuf>,
}

/// Inside the user's home directory: written, any of these runs code or grants a login.
const USER_WRITE: &[(&str, bool, Guarded)] = &[
    (
        ".ssh",
        true,
        g("ssh", "the SSH directory (keys and authorized logins)"),
    ),
    (".gnupg", true, g("gnupg", "the GnuPG keyring")),
    (".bashrc", false, STARTUP),
    (".bash_profile", false, STARTUP),
    (".bash_login", false, STARTUP),
    (".bash_logout", false, STARTUP),
    (".profile", false, STARTUP),
    (".zshrc", false, STARTUP),
    (".zshenv", false, STARTUP),
    (".zprofile", false, STARTUP),
    (".zlogin", false, STARTUP),
    (".config/fish", true, STARTUP),
    (".config/autostart", true, AUTOSTART),
    (".config/systemd", true, AUTOSTART),
    (".local/share/systemd", true, AUTOSTART),
    (".config/environment.d", true, AUTOSTART),
    (".pam_environment", false, STARTUP),
    (".xprofile", false, STARTUP),
    (".xinitrc", false, STARTUP),
    (".netrc", false, CREDENTIAL),
    (".git-credentials", false, CREDENTIAL),
    (".pgpass", false, CREDENTIAL),
    (".aws", true, CREDENTIAL),
    (".kube", true, CREDENTIAL),
    (".docker/config.json", false, CREDENTIAL),
    (".npmrc", false, CREDENTIAL),
    (".pypirc", false, CREDENTIAL),
    (
        ".gitconfig",
        false,
        g(
            "gitconfig",
            "git's configuration (it can name programs git runs)",
        ),
    ),
];

/// Inside the user's home directory: read, any of these hands over a secret.
const USER_READ: &[(&str, bool, Guarded)] = &[
    // The directory as a whole (`tar c ~/.ssh`, `cp -r ~/.ssh`): it holds the private keys.
    (".ssh", false, PRIVATE_KEY),
    (".ssh/id_rsa", false, PRIVATE_KEY),
    (".ssh/id_ecdsa", false, PRIVATE_KEY),
    (".ssh/id_ed25519", false, PRIVATE_KEY),
    (".ssh/id_dsa", false, PRIVATE_KEY),
    (".gnupg", true, g("gnupg", "the GnuPG keyring")),
    (".netrc", false, CREDENTIAL),
    (".git-credentials", false, CREDENTIAL),
    (".pgpass", false, CREDENTIAL),
    (".aws/credentials", false, CREDENTIAL),
    (".kube/config", false, CREDENTIAL),
    (".docker/config.json", false, CREDENTIAL),
    (".npmrc", false, CREDENTIAL),
    (".pypirc", false, CREDENTIAL),
];

/// Inside the Hermes home: written, any of these changes who may use the daemon, what it
/// runs unattended, or its own rules.
const HOME_WRITE: &[(&str, bool, Guarded)] = &[
    (".env", false, HOME_SECRETS),
    (
        "config.yaml",
        false,
        g(
            "hermes-config",
            "the Hermes configuration (it sets the agent's own safety rules)",
        ),
    ),
    ("auth.json", false, HOME_SECRETS),
    ("auth.lock", false, HOME_SECRETS),
    (".anthropic_oauth.json", false, HOME_SECRETS),
    ("webhook_subscriptions.json", false, HOME_SECRETS),
    ("auth", true, HOME_SECRETS),
    ("mcp-tokens", true, HOME_SECRETS),
    (
        "platforms/pairing",
        true,
        g(
            "pairing",
            "the pairing store (it decides who may talk to the agent)",
        ),
    ),
    (
        "scripts",
        true,
        g(
            "hermes-scripts",
            "the scripts directory (cron runs what is there)",
        ),
    ),
    (
        "cron",
        true,
        g("hermes-cron", "the cron store (jobs run unattended)"),
    ),
    (
        "hooks",
        true,
        g(
            "hermes-hooks",
            "the hooks directory (hooks run with the operator's rights)",
        ),
    ),
    (
        "shell-hooks-allowlist.json",
        false,
        g(
            "hermes-hooks",
            "the hooks allowlist (an approved hook runs with the operator's rights)",
        ),
    ),
    (
        "shell-hooks-allowlist.json.lock",
        false,
        g(
            "hermes-hooks",
            "the hooks allowlist (an approved hook runs with the operator's rights)",
        ),
    ),
    ("state.db", false, STATE_DB),
    ("state.db-wal", false, STATE_DB),
    ("state.db-shm", false, STATE_DB),
    ("state.db-journal", false, STATE_DB),
    ("gateway.lock", false, STATE_DB),
];

/// Inside the Hermes home: read, any of these hands over a credential.
const HOME_READ: &[(&str, bool, Guarded)] = &[
    (".env", false, HOME_SECRETS),
    ("auth.json", false, HOME_SECRETS),
    ("auth.lock", false, HOME_SECRETS),
    (".anthropic_oauth.json", false, HOME_SECRETS),
    ("webhook_subscriptions.json", false, HOME_SECRETS),
    ("auth", true, HOME_SECRETS),
    ("cache/bws_cache.json", false, HOME_SECRETS),
    ("mcp-tokens", true, HOME_SECRETS),
];

/// Outside any home: system configuration, boot and service files, cron spools.
const SYSTEM_WRITE: &[(&str, Guarded)] = &[
    ("/etc", SYSTEM),
    ("/boot", SYSTEM),
    ("/usr/lib/systemd", SYSTEM),
    ("/lib/systemd", SYSTEM),
    ("/var/spool/cron", AUTOSTART),
    ("/var/spool/anacron", AUTOSTART),
    ("/private/etc", SYSTEM),
    ("/private/var", SYSTEM),
];

const SYSTEM_READ: &[(&str, Guarded)] = &[
    ("/etc/shadow", g("shadow", "the system's password hashes")),
    ("/etc/gshadow", g("shadow", "the system's password hashes")),
    ("/etc/sudoers", g("sudoers", "the sudo rules")),
];

const fn g(key: &'static str, what: &'static str) -> Guarded {
    Guarded { key, what }
}
const STARTUP: Guarded = g(
    "shell-startup",
    "a shell start-up file (it runs at every login)",
);
const AUTOSTART: Guarded = g(
    "autostart",
    "an autostart or cron location (it runs programs unattended)",
);
const CREDENTIAL: Guarded = g("credentials", "a credential store");
const PRIVATE_KEY: Guarded = g("ssh-private-key", "an SSH private key");
const HOME_SECRETS: Guarded = g("hermes-secrets", "where the Hermes home keeps its secrets");
const STATE_DB: Guarded = g("state-db", "the daemon's state database");
const SYSTEM: Guarded = g("system", "a system path");

impl Places {
    /// `user_home` is the tools' `HOME` (absent or empty: no user-home rules apply).
    /// `hermes_home` is compared both as given and with symlinks resolved.
    pub fn new(user_home: Option<&Path>, hermes_home: &Path) -> Self {
        let user_home = user_home.filter(|h| !h.as_os_str().is_empty()).map(fold);
        let mut hermes_homes = vec![fold(hermes_home)];
        if let Ok(real) = std::fs::canonicalize(hermes_home)
            && !hermes_homes.contains(&real)
        {
            hermes_homes.push(real);
        }
        Places {
            user_home,
            hermes_homes,
        }
    }

    /// Why writing (creating, replacing, appending to, changing the mode of) `path` needs
    /// the operator's say, if it does. `path` should be absolute; a relative one is judged
    /// as is, which only system rules can match.
    pub fn guard_write(&self, path: &Path) -> Option<Guarded> {
        let path = fold(path);
        self.in_homes(&path, HOME_WRITE)
            .or_else(|| self.in_user_home(&path, USER_WRITE))
            .or_else(|| in_system(&path, SYSTEM_WRITE))
    }

    /// Why reading `path` hands over a secret, if it does.
    pub fn guard_read(&self, path: &Path) -> Option<Guarded> {
        let path = fold(path);
        self.in_homes(&path, HOME_READ)
            .or_else(|| self.in_user_home(&path, USER_READ))
            .or_else(|| in_system(&path, SYSTEM_READ))
    }

    /// The Hermes home's path as given (folded), for messages.
    pub fn hermes_home(&self) -> &Path {
        &self.hermes_homes[0]
    }

    /// The user's home directory, if known.
    pub fn user_home(&self) -> Option<&Path> {
        self.user_home.as_deref()
    }

    fn in_homes(&self, path: &Path, table: &[(&str, bool, Guarded)]) -> Option<Guarded> {
        self.hermes_homes
            .iter()
            .find_map(|home| in_table(home, path, table))
    }

    fn in_user_home(&self, path: &Path, table: &[(&str, bool, Guarded)]) -> Option<Guarded> {
        in_table(self.user_home.as_deref()?, path, table)
    }
}

fn in_table(base: &Path, path: &Path, table: &[(&str, bool, Guarded)]) -> Option<Guarded> {
    let rest = path.strip_prefix(base).ok()?;
    table.iter().find_map(|(entry, is_dir, guarded)| {
        let entry = Path::new(entry);
        let hit = if *is_dir {
            rest.starts_with(entry)
        } else {
            rest == entry
        };
        hit.then_some(*guarded)
    })
}

fn in_system(path: &Path, table: &[(&str, Guarded)]) -> Option<Guarded> {
    table
        .iter()
        .find_map(|(prefix, guarded)| path.starts_with(prefix).then_some(*guarded))
}

/// `path` with `.` dropped and `..` applied to what precedes it (lexically; symlinks are the
/// caller's to resolve). A `..` above the root stays at the root.
pub fn fold(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() && !path.is_absolute() {
                    out.push("..");
                }
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn places() -> Places {
        Places::new(Some(Path::new("/home/ann")), Path::new("/home/ann/.hermes"))
    }

    #[test]
    fn login_and_startup_files_in_the_user_home_are_guarded_for_writing() {
        let p = places();
        for path in [
            "/home/ann/.ssh/authorized_keys",
            "/home/ann/.ssh",
            "/home/ann/.bashrc",
            "/home/ann/./.zshrc",
            "/home/ann/x/../.profile",
            "/home/ann/.config/systemd/user/evil.service",
            "/home/ann/.config/autostart/x.desktop",
            "/var/spool/cron/crontabs/ann",
            "/etc/cron.d/x",
        ] {
            assert!(p.guard_write(Path::new(path)).is_some(), "{path}");
        }
        for path in [
            "/home/ann/project/.bashrc.example",
            "/home/ann/notes.txt",
            "/tmp/x",
        ] {
            assert_eq!(p.guard_write(Path::new(path)), None, "{path}");
        }
    }

    #[test]
    fn the_hermes_home_guards_what_decides_access_and_what_runs_unattended() {
        let p = places();
        let key = |path: &str| p.guard_write(Path::new(path)).map(|g| g.key);
        assert_eq!(
            key("/home/ann/.hermes/platforms/pairing/telegram-approved.json"),
            Some("pairing")
        );
        assert_eq!(
            key("/home/ann/.hermes/scripts/x.sh"),
            Some("hermes-scripts")
        );
        assert_eq!(key("/home/ann/.hermes/.env"), Some("hermes-secrets"));
        assert_eq!(key("/home/ann/.hermes/config.yaml"), Some("hermes-config"));
        assert_eq!(key("/home/ann/.hermes/state.db-wal"), Some("state-db"));
        // Who may add or approve a hook: the operator only (SECURITY.md).
        assert_eq!(
            key("/home/ann/.hermes/shell-hooks-allowlist.json"),
            Some("hermes-hooks")
        );
        assert_eq!(
            key("/home/ann/.hermes/hooks/audit/HOOK.yaml"),
            Some("hermes-hooks")
        );
        assert_eq!(
            key("/home/ann/.hermes/hooks/../shell-hooks-allowlist.json"),
            Some("hermes-hooks")
        );
        assert_eq!(key("/home/ann/.hermes/memories/MEMORY.md"), None);
        assert_eq!(key("/home/ann/.hermes/SOUL.md"), None);
    }

    #[test]
    fn secrets_are_guarded_for_reading_but_ordinary_files_are_not() {
        let p = places();
        let key = |path: &str| p.guard_read(Path::new(path)).map(|g| g.key);
        assert_eq!(key("/home/ann/.hermes/.env"), Some("hermes-secrets"));
        assert_eq!(
            key("/home/ann/.hermes/mcp-tokens/github.json"),
            Some("hermes-secrets")
        );
        assert_eq!(key("/home/ann/.ssh/id_ed25519"), Some("ssh-private-key"));
        assert_eq!(key("/home/ann/.ssh"), Some("ssh-private-key"));
        assert_eq!(key("/home/ann/.ssh/known_hosts"), None);
        assert_eq!(key("/etc/shadow"), Some("shadow"));
        assert_eq!(key("/home/ann/.ssh/id_ed25519.pub"), None);
        assert_eq!(key("/home/ann/.hermes/config.yaml"), None);
        assert_eq!(key("/etc/hostname"), None);
    }

    #[test]
    fn without_a_user_home_only_hermes_and_system_rules_apply() {
        let p = Places::new(None, Path::new("/srv/hermes"));
        assert_eq!(p.guard_write(Path::new("/root/.bashrc")), None);
        assert!(p.guard_write(Path::new("/srv/hermes/.env")).is_some());
        assert!(p.guard_write(Path::new("/etc/passwd")).is_some());
    }

    #[test]
    fn folding_applies_dot_dot_lexically() {
        assert_eq!(fold(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
        assert_eq!(fold(Path::new("/../etc")), PathBuf::from("/etc"));
        assert_eq!(fold(Path::new("a/../../b")), PathBuf::from("../b"));
    }
}
