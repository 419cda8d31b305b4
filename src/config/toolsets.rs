//! `platform_toolsets:` and `agent.disabled_toolsets` — which toolsets each platform's agent
//! is offered, in the Hermes layout (`hermes_cli/tools_config.py`): a list of toolset names
//! per platform (`telegram`, `discord`, `slack`, `api_server`, `cli`, `cron`, ...), MCP
//! servers by name or as `mcp-<name>`, `no_mcp` to leave every server out, and a global
//! list subtracted last.
//!
//! A name that is no toolset is a warning naming the key, as Hermes warns: the rest of the
//! list still applies.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::Value;

use super::mcp::McpServerConfig;
use super::parse::{Issues, at, kind};
use super::toolset_names::{is_known, is_valid_toolset, preset_name};

/// The validated toolset selection.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ToolsetsConfig {
    /// Per platform, the toolsets listed for it (a platform not listed uses its preset).
    pub platform_toolsets: BTreeMap<String, Vec<String>>,
    /// `agent.disabled_toolsets`: taken away on every platform.
    pub disabled_toolsets: Vec<String>,
}

pub fn toolsets(
    issues: &mut Issues,
    platform_toolsets: Option<&Value>,
    disabled: Option<&Value>,
    mcp_servers: &BTreeMap<String, McpServerConfig>,
) -> ToolsetsConfig {
    let servers: BTreeSet<String> = mcp_servers.keys().cloned().collect();
    let mut config = ToolsetsConfig::default();
    match platform_toolsets {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            for (platform, names) in map {
                let key = format!("platform_toolsets.{platform}");
                let Some(names) = issues.list(at(&key, Some(names)), false) else {
                    continue;
                };
                check_names(issues, &key, &names, &servers, Some(platform));
                if !names.is_empty() && !names.iter().any(|n| is_known(n, &servers)) {
                    issues.warn(format!(
                        "{key}: none of its toolsets exists, so the agent there has no \
                         built-in tools"
                    ));
                }
                config.platform_toolsets.insert(platform.clone(), names);
            }
        }
        Some(other) => issues.error(
            "platform_toolsets",
            format!(
                "expected a mapping of platform to toolset names, got {}",
                kind(other)
            ),
        ),
    }
    config.disabled_toolsets = issues
        .list(at("agent.disabled_toolsets", disabled), false)
        .unwrap_or_default();
    let disabled = config.disabled_toolsets.clone();
    check_names(issues, "agent.disabled_toolsets", &disabled, &servers, None);
    config
}

/// Warns about each name in `gateway.guest_tools` that is no toolset, tool or MCP server:
/// it selects nothing, so the guest gets less than the operator meant.
pub fn check_guest_tools(
    issues: &mut Issues,
    names: &[String],
    mcp_servers: &BTreeMap<String, McpServerConfig>,
) {
    let servers: BTreeSet<String> = mcp_servers.keys().cloned().collect();
    for (index, name) in names.iter().enumerate() {
        if !super::toolset_names::is_known_entry(name, &servers) {
            issues.warn(format!(
                "gateway.guest_tools[{index}]: '{name}' is not a toolset, a tool or a \
                 configured MCP server; it gives guests nothing"
            ));
        }
    }
}

fn check_names(
    issues: &mut Issues,
    key: &str,
    names: &[String],
    servers: &BTreeSet<String>,
    platform: Option<&str>,
) {
    for (index, name) in names.iter().enumerate() {
        if is_known(name, servers) {
            continue;
        }
        let hint = platform
            .map(preset_name)
            .filter(|preset| is_valid_toolset(preset))
            .map(|preset| format!(" (did you mean '{preset}'?)"))
            .unwrap_or_default();
        issues.warn(format!(
            "{key}[{index}]: '{name}' is not a toolset or a configured MCP server{hint}; \
             it is skipped"
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn validate(platform_toolsets: Value, disabled: Value) -> (ToolsetsConfig, Issues) {
        let mut issues = Issues::default();
        let mut servers = BTreeMap::new();
        let mut sub = Issues::default();
        servers.extend(super::super::mcp::mcp_servers(
            &mut sub,
            Some(&json!({"gh": {"command": "gh-mcp"}})),
        ));
        let config = toolsets(
            &mut issues,
            Some(&platform_toolsets),
            Some(&disabled),
            &servers,
        );
        (config, issues)
    }

    #[test]
    fn lists_are_read_and_unknown_names_are_warned_about_by_key() {
        let (config, issues) = validate(
            json!({"telegram": ["hermes-telegram", "no_mcp"], "cli": ["hermes", "mcp-gh"]}),
            json!(["memory", "bogus"]),
        );
        assert!(issues.errors.is_empty(), "{:?}", issues.errors);
        assert_eq!(
            config.platform_toolsets["telegram"],
            ["hermes-telegram", "no_mcp"]
        );
        assert_eq!(config.disabled_toolsets, ["memory", "bogus"]);
        assert_eq!(issues.warnings.len(), 2, "{:?}", issues.warnings);
        assert!(
            issues.warnings[0].contains("platform_toolsets.cli[0]")
                && issues.warnings[0].contains("hermes-cli"),
            "{:?}",
            issues.warnings
        );
        assert!(issues.warnings[1].contains("agent.disabled_toolsets[1]"));
    }

    #[test]
    fn a_list_of_nothing_valid_says_so_and_a_bad_shape_is_an_error() {
        let (_, issues) = validate(json!({"telegram": ["nope"]}), Value::Null);
        assert!(
            issues
                .warnings
                .iter()
                .any(|w| w.contains("no built-in tools")),
            "{:?}",
            issues.warnings
        );
        let (_, issues) = validate(json!(["telegram"]), Value::Null);
        assert!(issues.errors[0].to_string().contains("platform_toolsets"));
    }

    #[test]
    fn unknown_guest_tools_are_warned_about_by_index() {
        let mut issues = Issues::default();
        let mut sub = Issues::default();
        let servers =
            super::super::mcp::mcp_servers(&mut sub, Some(&json!({"gh": {"command": "gh-mcp"}})));
        let names: Vec<String> = ["clarify", "terminal", "read_file", "gh", "shell"]
            .map(str::to_owned)
            .to_vec();
        check_guest_tools(&mut issues, &names, &servers);
        assert_eq!(issues.warnings.len(), 1, "{:?}", issues.warnings);
        assert!(
            issues.warnings[0].contains("gateway.guest_tools[4]")
                && issues.warnings[0].contains("'shell'"),
            "{:?}",
            issues.warnings
        );
    }
}
