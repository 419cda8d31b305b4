//! Toolsets and platform presets (Python `toolsets.py`), restricted to the tools hermesd
//! implements, and the enabled/disabled resolution of `model_tools.get_tool_definitions`.
//!
//! Every Python toolset name is known, so configs written for the Python Hermes validate;
//! toolsets whose tools hermesd does not have (web, browser, tts, ...) resolve to nothing.
//! The table and its name lookups live in `config::toolset_names`, below configuration's
//! validation; this module turns names into the tools an agent is offered.

pub mod guest;
mod platform;

use std::collections::BTreeSet;

pub use crate::config::toolset_names::{
    ALL_MCP, HERMES_CORE_TOOLS, LEGACY_TOOLSETS, NO_MCP, TOOLSETS, Toolset, get_toolset, is_known,
    is_valid_toolset, legacy_tools, preset_name, resolve_toolset,
};
pub use platform::{default_toolset, platform_toolsets, with_mcp_servers};

/// A platform bundle's own tools minus the core ones (`bundle_non_core_tools`): disabling
/// `hermes-discord` must not strip `terminal` that every other enabled toolset shares.
fn bundle_non_core_tools(name: &str) -> BTreeSet<String> {
    let core: BTreeSet<&str> = HERMES_CORE_TOOLS.iter().copied().collect();
    let Some(toolset) = get_toolset(name) else {
        return resolve_toolset(name)
            .into_iter()
            .filter(|t| !core.contains(t.as_str()))
            .collect();
    };
    let mut remove: BTreeSet<String> = toolset
        .tools
        .iter()
        .filter(|t| !core.contains(**t))
        .map(|t| (*t).to_owned())
        .collect();
    for included in toolset.includes {
        if let Some(inc) = get_toolset(included) {
            remove.extend(
                inc.tools
                    .iter()
                    .filter(|t| !core.contains(**t))
                    .map(|t| (*t).to_owned()),
            );
        }
    }
    remove
}

/// The tool names selected by `enabled` (every toolset when `None`) minus `disabled`, as
/// Python's `get_tool_definitions` resolves them. Unknown names are logged and ignored.
pub fn resolve_toolsets(enabled: Option<&[String]>, disabled: &[String]) -> BTreeSet<String> {
    let mut tools = BTreeSet::new();
    match enabled {
        Some(names) => {
            for name in names {
                if is_valid_toolset(name) {
                    tools.extend(resolve_toolset(name));
                } else if let Some(legacy) = legacy_tools(name) {
                    tools.extend(legacy.iter().map(|t| (*t).to_owned()));
                } else {
                    // MCP toolsets resolve in the registry; unknown names were reported
                    // when the configuration was loaded.
                    tracing::debug!(toolset = %name, "not a static toolset");
                }
            }
        }
        None => {
            for toolset in TOOLSETS {
                tools.extend(resolve_toolset(toolset.name));
            }
        }
    }
    let removed = disabled_tools(disabled);
    tools.retain(|t| !removed.contains(t));
    tools
}

/// The tools `disabled` takes away. A platform bundle (`hermes-*`) or posture toolset only
/// takes away its non-core tools, so disabling it never strips the shared core.
pub fn disabled_tools(disabled: &[String]) -> BTreeSet<String> {
    let mut removed = BTreeSet::new();
    for name in disabled {
        if is_valid_toolset(name) {
            let posture = get_toolset(name).is_some_and(|t| t.posture);
            if name.starts_with("hermes-") || posture {
                removed.extend(bundle_non_core_tools(name));
            } else {
                removed.extend(resolve_toolset(name));
            }
        } else if let Some(legacy) = legacy_tools(name) {
            removed.extend(legacy.iter().map(|t| (*t).to_owned()));
        } else {
            tracing::debug!(toolset = %name, "not a static toolset");
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn includes_resolve_recursively_and_presets_share_the_core() {
        assert_eq!(
            resolve_toolset("debugging").into_iter().collect::<Vec<_>>(),
            names(&[
                "patch",
                "process",
                "read_file",
                "search_files",
                "terminal",
                "web_extract",
                "web_search",
                "write_file"
            ])
        );
        let gateway = resolve_toolset("hermes-gateway");
        assert_eq!(gateway.len(), HERMES_CORE_TOOLS.len());
        assert_eq!(
            resolve_toolset("safe").into_iter().collect::<Vec<_>>(),
            names(&["web_extract", "web_search"])
        );
        assert!(!resolve_toolset("hermes-api-server").contains("clarify"));
        assert_eq!(resolve_toolset("all").len(), HERMES_CORE_TOOLS.len());
    }

    #[test]
    fn every_include_names_a_known_toolset() {
        for toolset in TOOLSETS {
            for included in toolset.includes {
                assert!(
                    get_toolset(included).is_some(),
                    "{} includes {included}",
                    toolset.name
                );
            }
        }
    }
}
