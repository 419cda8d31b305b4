//! Which toolsets a platform's agent gets (Hermes's `_get_platform_tools`): the
//! `platform_toolsets.<platform>` list or the platform's `hermes-<platform>` preset, the MCP
//! servers (all of them unless the list names some, none with `no_mcp`) and
//! `agent.disabled_toolsets` subtracted last.
//!
//! The result is a list of toolset names for [`super::resolve_toolsets`] and the registry,
//! which also resolve `mcp-<server>`, a bare server name and `mcp` to MCP tools.

use std::collections::BTreeSet;

use super::{ALL_MCP, NO_MCP, TOOLSETS, get_toolset, preset_name, resolve_toolset};
use crate::config::toolset_names::MCP_TOOLSET_PREFIX;

/// The toolsets a user picks one by one (Hermes's `CONFIGURABLE_TOOLSETS` keys). A list
/// naming any of them is an explicit choice; otherwise presets are mapped back onto them.
pub const CONFIGURABLE: &[&str] = &[
    "web",
    "browser",
    "terminal",
    "file",
    "code_execution",
    "vision",
    "video",
    "image_gen",
    "video_gen",
    "x_search",
    "tts",
    "skills",
    "todo",
    "memory",
    "context_engine",
    "session_search",
    "clarify",
    "delegation",
    "cronjob",
    "homeassistant",
    "spotify",
    "discord",
    "discord_admin",
    "yuanbao",
    "computer_use",
];

/// Whether `name` is some platform's default preset (Hermes's `PLATFORMS`): named in a list,
/// it is mapped onto configurable toolsets and never passed through as it is.
fn is_platform_preset(name: &str) -> bool {
    ["hermes-cli", "hermes-api-server", "hermes-cron"].contains(&name)
        || get_toolset("hermes-gateway").is_some_and(|gateway| gateway.includes.contains(&name))
}

/// The preset a platform uses when `platform_toolsets` has no list for it (Hermes's
/// `PLATFORMS[..].default_toolset`). A platform with no preset of its own (an in-process
/// adapter, a benchmark) gets the CLI's, the core tools, where Hermes's plugin platforms
/// would get nothing: hermesd has no plugins to fill such a preset.
pub fn default_toolset(platform: &str) -> String {
    let preset = preset_name(platform);
    if get_toolset(&preset).is_some() {
        preset
    } else {
        "hermes-cli".to_owned()
    }
}

/// The toolset names enabled on `platform`. `listed` is `platform_toolsets.<platform>`
/// (`None`: not configured), `mcp_servers` the enabled servers' names, `disabled`
/// `agent.disabled_toolsets`.
pub fn platform_toolsets(
    platform: &str,
    listed: Option<&[String]>,
    mcp_servers: &BTreeSet<String>,
    disabled: &[String],
) -> Vec<String> {
    let default = default_toolset(platform);
    let names: Vec<String> = listed.map_or_else(|| vec![default.clone()], <[String]>::to_vec);
    let configurable = |name: &str| CONFIGURABLE.contains(&name);
    let static_tools = |name: &str| resolve_toolset(name);

    let mut enabled: BTreeSet<String> = BTreeSet::new();
    // Presets (and any other composite) in the list are mapped onto the configurable
    // toolsets they wholly contain, as Hermes does, so a partly covered toolset stays off.
    let composite: BTreeSet<String> = names
        .iter()
        .filter(|n| !configurable(n) && TOOLSETS.iter().any(|t| t.name == n.as_str()))
        .flat_map(|n| static_tools(n))
        .collect();
    if names.iter().any(|n| configurable(n)) {
        enabled.extend(names.iter().filter(|n| configurable(n)).cloned());
    }
    for key in CONFIGURABLE {
        let tools = static_tools(key);
        if !tools.is_empty() && tools.is_subset(&composite) {
            enabled.insert((*key).to_owned());
        }
    }

    // Anything else named stays as written: custom composites (`debugging`), legacy names,
    // MCP toolsets. A platform's own preset name is not passed through (it was mapped).
    let passthrough: BTreeSet<&String> = names
        .iter()
        .filter(|n| !configurable(n) && !is_platform_preset(n))
        .collect();
    let no_mcp = names.iter().any(|n| n == NO_MCP);
    let named_servers: BTreeSet<&String> = passthrough
        .iter()
        .copied()
        .filter(|n| mcp_servers.contains(n.as_str()))
        .collect();
    for name in &passthrough {
        if name.as_str() != NO_MCP && !mcp_servers.contains(name.as_str()) {
            if no_mcp && is_mcp_toolset(name) {
                continue;
            }
            enabled.insert((*name).clone());
        }
    }
    if no_mcp {
        // `no_mcp` wins over any server the list also names.
    } else if named_servers.is_empty() {
        enabled.extend(mcp_servers.iter().cloned());
    } else {
        enabled.extend(named_servers.into_iter().cloned());
    }

    for name in disabled {
        enabled.remove(name);
    }
    enabled.into_iter().collect()
}

/// An explicit list (a scheduled job's `enabled_toolsets`) with the MCP servers merged in as
/// Hermes's cron does: none with `no_mcp`, only the named ones when it names some, else all.
pub fn with_mcp_servers(listed: &[String], mcp_servers: &BTreeSet<String>) -> Vec<String> {
    let mut result: Vec<String> = listed.iter().filter(|n| *n != NO_MCP).cloned().collect();
    let names_a_server = result.iter().any(|n| mcp_servers.contains(n));
    if result.len() == listed.len() && !names_a_server {
        result.extend(mcp_servers.iter().filter(|s| !listed.contains(s)).cloned());
    }
    result
}

/// Whether a list entry stands for MCP tools (`mcp`, `mcp-<server>`).
fn is_mcp_toolset(name: &str) -> bool {
    name == ALL_MCP || name.starts_with(MCP_TOOLSET_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::toolsets::{is_known, resolve_toolsets};

    fn list(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| (*s).to_owned()).collect()
    }

    fn servers(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn an_unconfigured_platform_gets_its_preset_and_every_mcp_server() {
        let enabled = platform_toolsets("telegram", None, &servers(&["gh"]), &[]);
        assert!(enabled.contains(&"clarify".to_owned()), "{enabled:?}");
        assert!(enabled.contains(&"gh".to_owned()), "{enabled:?}");
        let api = platform_toolsets("api_server", None, &servers(&[]), &[]);
        assert!(!api.contains(&"clarify".to_owned()), "{api:?}");
        assert!(api.contains(&"terminal".to_owned()), "{api:?}");
        let tools = resolve_toolsets(Some(&api), &[]);
        assert!(tools.contains("read_file") && !tools.contains("clarify"));
        let unknown = platform_toolsets("scripted", None, &servers(&[]), &[]);
        assert_eq!(unknown, platform_toolsets("cli", None, &servers(&[]), &[]));
    }

    #[test]
    fn an_explicit_list_selects_toolsets_and_mcp_servers() {
        let all = servers(&["gh", "db"]);
        let enabled = platform_toolsets("telegram", Some(&list(&["file", "db"])), &all, &[]);
        assert_eq!(enabled, list(&["db", "file"]));
        let enabled = platform_toolsets("telegram", Some(&list(&["file", NO_MCP])), &all, &[]);
        assert_eq!(enabled, list(&["file"]));
        let enabled = platform_toolsets(
            "telegram",
            Some(&list(&["hermes-telegram", NO_MCP, "mcp-gh"])),
            &all,
            &[],
        );
        assert!(!enabled.iter().any(|n| n.contains("gh") || n == "db"));
        assert!(enabled.contains(&"terminal".to_owned()));
        // An empty list turns off every built-in but keeps the MCP servers (Hermes's rule).
        let enabled = platform_toolsets("telegram", Some(&[]), &all, &[]);
        assert_eq!(enabled, list(&["db", "gh"]));
        // A custom composite is passed through and resolves later.
        let enabled = platform_toolsets("telegram", Some(&list(&["debugging"])), &all, &[]);
        assert!(enabled.contains(&"debugging".to_owned()), "{enabled:?}");
    }

    #[test]
    fn a_job_list_gets_the_servers_unless_it_names_some_or_says_no_mcp() {
        let all = servers(&["gh", "db"]);
        assert_eq!(
            with_mcp_servers(&list(&["memory"]), &all),
            list(&["memory", "db", "gh"])
        );
        assert_eq!(
            with_mcp_servers(&list(&["memory", "gh"]), &all),
            list(&["memory", "gh"])
        );
        assert_eq!(
            with_mcp_servers(&list(&["memory", NO_MCP]), &all),
            list(&["memory"])
        );
    }

    #[test]
    fn disabled_toolsets_are_subtracted_last() {
        let enabled =
            platform_toolsets("discord", None, &servers(&["gh"]), &list(&["memory", "gh"]));
        assert!(!enabled.contains(&"memory".to_owned()));
        assert!(!enabled.contains(&"gh".to_owned()));
        assert!(enabled.contains(&"terminal".to_owned()));
    }

    #[test]
    fn known_names_include_mcp_forms_and_sentinels() {
        let all = servers(&["gh"]);
        for name in [
            "hermes-telegram",
            "file",
            "gh",
            "mcp-gh",
            "mcp",
            NO_MCP,
            "file_tools",
        ] {
            assert!(is_known(name, &all), "{name}");
        }
        for name in ["hermes", "mcp-other", "nope"] {
            assert!(!is_known(name, &all), "{name}");
        }
    }
}
