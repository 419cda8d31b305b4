//! Resolution of `HERMES_HOME` and named profiles, exactly as the Python Hermes does it.
//!
//! Order: an explicit override (the `--home` flag) → the `HERMES_HOME` environment variable →
//! the platform default `~/.hermes`. `--profile NAME` selects `<root>/profiles/NAME`, where the
//! root is the explicit/env home if given, else the platform default. Everything that spawns a
//! child process must pass the resolved home explicitly (see [`HermesHome::child_env`]).

pub mod private;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// Why a home could not be resolved.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum HomeError {
    #[error(
        "invalid profile name {0:?}: use 1-64 characters from a-z, 0-9, '_' and '-', starting with a letter or digit"
    )]
    InvalidProfile(String),
    #[error("cannot determine the home directory: neither HERMES_HOME nor HOME is set")]
    NoHome,
}

/// The resolved Hermes home directory (the root of config, `.env`, `state.db`, logs).
#[derive(Clone, PartialEq, Eq)]
pub struct HermesHome {
    path: PathBuf,
    profile: Option<String>,
}

impl fmt::Debug for HermesHome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HermesHome({})", self.path.display())
    }
}

/// Checks a profile name against `^[a-z0-9][a-z0-9_-]{0,63}$`.
pub fn validate_profile_name(name: &str) -> Result<(), HomeError> {
    let bytes = name.as_bytes();
    let first_ok = bytes
        .first()
        .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    let rest_ok = bytes
        .iter()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_' || *b == b'-');
    if first_ok && rest_ok && bytes.len() <= 64 {
        Ok(())
    } else {
        Err(HomeError::InvalidProfile(name.to_owned()))
    }
}

/// The platform default root (`$HOME/.hermes`), ignoring `HERMES_HOME`.
pub fn default_root(env: &BTreeMap<String, String>) -> Option<PathBuf> {
    env.get("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| Path::new(h).join(".hermes"))
}

impl HermesHome {
    /// Resolves the home from an explicit override, the environment and an optional profile.
    pub fn resolve(
        explicit: Option<&Path>,
        profile: Option<&str>,
        env: &BTreeMap<String, String>,
    ) -> Result<Self, HomeError> {
        let root = match explicit {
            Some(path) => path.to_path_buf(),
            None => match env.get("HERMES_HOME").filter(|h| !h.is_empty()) {
                Some(home) => PathBuf::from(home),
                None => default_root(env).ok_or(HomeError::NoHome)?,
            },
        };
        match profile {
            None => Ok(Self {
                path: root,
                profile: None,
            }),
            Some(name) => {
                validate_profile_name(name)?;
                // A HERMES_HOME that already points at a profile keeps its root.
                let root = profile_root_of(&root).unwrap_or(root);
                Ok(Self {
                    path: root.join("profiles").join(name),
                    profile: Some(name.to_owned()),
                })
            }
        }
    }

    /// A home at a fixed path (tests, benchmarks).
    pub fn at(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            profile: None,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn profile(&self) -> Option<&str> {
        self.profile.as_deref()
    }

    pub fn state_db(&self) -> PathBuf {
        self.path.join("state.db")
    }

    /// `cron/`: `jobs.json`, its `.jobs.lock` and the run outputs, shared with Python.
    pub fn cron_dir(&self) -> PathBuf {
        self.path.join("cron")
    }

    pub fn config_yaml(&self) -> PathBuf {
        self.path.join("config.yaml")
    }

    /// `cache/audio/`: voice notes hermesd made (spoken replies, `text_to_speech`).
    pub fn audio_cache_dir(&self) -> PathBuf {
        self.path.join("cache").join("audio")
    }

    /// `gateway_voice_mode.json`: each chat's `/voice` setting, shared with Python.
    pub fn voice_mode_json(&self) -> PathBuf {
        self.path.join("gateway_voice_mode.json")
    }

    pub fn dotenv(&self) -> PathBuf {
        self.path.join(".env")
    }

    /// `cache/web/`: the full text of extracted pages longer than their budget, so the model
    /// can page through what `web_extract` cut (Hermes's location).
    pub fn web_cache_dir(&self) -> PathBuf {
        self.path.join("cache").join("web")
    }

    /// `sessions/`: the routing scope's directory (its path names the scope in state.db).
    pub fn sessions_dir(&self) -> PathBuf {
        self.path.join("sessions")
    }

    /// Creates the home directory 0700 if it does not exist (an existing home keeps its
    /// mode, see [`private`]), and its `sessions/` directory 0700, so the router, which
    /// creates that directory too, finds it already private.
    pub fn ensure_exists(&self) -> std::io::Result<()> {
        if !self.path.is_dir() {
            private::create_dir_all(&self.path)?;
            // Set outright: a umask that takes the owner's own bits would leave it unusable.
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(
                &self.path,
                std::fs::Permissions::from_mode(private::DIR_MODE),
            )?;
        }
        private::create_dir_all(&self.sessions_dir())
    }

    /// Warns once in the log when the home is open to group or others (left as it is).
    pub fn warn_if_shared(&self) {
        private::warn_if_home_is_shared(&self.path);
    }

    /// The variables a child process must receive so it uses this same home.
    pub fn child_env(&self) -> [(&'static str, &Path); 1] {
        [("HERMES_HOME", self.path.as_path())]
    }

    /// The home as shown to people: `~/...` when under the user's home directory.
    pub fn display(&self, env: &BTreeMap<String, String>) -> String {
        if let Some(user_home) = env.get("HOME").filter(|h| !h.is_empty())
            && let Ok(rest) = self.path.strip_prefix(user_home)
        {
            return format!("~/{}", rest.display());
        }
        self.path.display().to_string()
    }
}

/// `<root>` when `path` is `<root>/profiles/<name>`.
fn profile_root_of(path: &Path) -> Option<PathBuf> {
    let parent = path.parent()?;
    if parent.file_name()? == "profiles" {
        parent.parent().map(Path::to_path_buf)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn explicit_beats_env_beats_default() {
        let e = env(&[("HERMES_HOME", "/env/home"), ("HOME", "/u")]);
        let explicit = HermesHome::resolve(Some(Path::new("/x")), None, &e).unwrap();
        assert_eq!(explicit.path(), Path::new("/x"));
        let from_env = HermesHome::resolve(None, None, &e).unwrap();
        assert_eq!(from_env.path(), Path::new("/env/home"));
        let default = HermesHome::resolve(None, None, &env(&[("HOME", "/u")])).unwrap();
        assert_eq!(default.path(), Path::new("/u/.hermes"));
        assert_eq!(
            HermesHome::resolve(None, None, &env(&[])),
            Err(HomeError::NoHome)
        );
    }

    #[test]
    fn profiles_live_under_the_root() {
        let e = env(&[("HOME", "/u")]);
        let home = HermesHome::resolve(None, Some("coder"), &e).unwrap();
        assert_eq!(home.path(), Path::new("/u/.hermes/profiles/coder"));
        assert_eq!(home.display(&e), "~/.hermes/profiles/coder");
        // HERMES_HOME already pointing at a profile: switch profile within the same root.
        let e2 = env(&[("HERMES_HOME", "/r/profiles/a")]);
        let other = HermesHome::resolve(None, Some("b"), &e2).unwrap();
        assert_eq!(other.path(), Path::new("/r/profiles/b"));
    }

    #[test]
    fn profile_names_are_checked() {
        for good in ["a", "0", "coder", "my_bot-2", &"a".repeat(64)] {
            assert!(validate_profile_name(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "-a",
            "_a",
            "A",
            "a b",
            "a/b",
            "..",
            &"a".repeat(65),
            "é",
        ] {
            assert!(validate_profile_name(bad).is_err(), "{bad}");
        }
    }
}
