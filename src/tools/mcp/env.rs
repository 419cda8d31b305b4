//! The environment a stdio MCP server starts with: a few harmless variables of the daemon's
//! own environment (the list Hermes passes: search path, home, user, locale, terminal, shell,
//! temp dir, and the `XDG_*` directories) plus exactly what its `env:` names. The daemon's
//! API keys and tokens never reach a server its configuration did not give them to.

use std::collections::BTreeMap;

use crate::config::Secret;

/// Variables a server may inherit from the daemon (Hermes `_SAFE_ENV_KEYS`).
const INHERITED: &[&str] = &[
    "PATH", "HOME", "USER", "LANG", "LC_ALL", "TERM", "SHELL", "TMPDIR",
];

/// The environment for a server: the inheritable part of `daemon_env`, then `configured`.
pub fn server_env(
    daemon_env: &BTreeMap<String, String>,
    configured: &BTreeMap<String, Secret>,
) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = daemon_env
        .iter()
        .filter(|(name, _)| INHERITED.contains(&name.as_str()) || name.starts_with("XDG_"))
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    for (name, value) in configured {
        env.insert(name.clone(), value.expose().to_owned());
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_harmless_variables_and_the_configured_ones_pass() {
        let daemon: BTreeMap<String, String> = [
            ("PATH", "/usr/bin"),
            ("HOME", "/home/h"),
            ("XDG_CONFIG_HOME", "/home/h/.config"),
            ("OPENAI_API_KEY", "sk-daemon"),
            ("TELEGRAM_BOT_TOKEN", "1:abc"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let configured = [("GITHUB_TOKEN".to_owned(), Secret::new("ghp_x"))].into();
        let env = server_env(&daemon, &configured);
        let names: Vec<&str> = env.keys().map(String::as_str).collect();
        assert_eq!(names, ["GITHUB_TOKEN", "HOME", "PATH", "XDG_CONFIG_HOME"]);
        assert_eq!(env["GITHUB_TOKEN"], "ghp_x");
    }
}
