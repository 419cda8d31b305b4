//! The names a toolset list may hold, known without the tools themselves: the static
//! toolset table, its include graph, each platform's preset name, the MCP spellings and the
//! guests' default list. Configuration validates lists against these; the tools side
//! resolves the same names into tools, so both read one table.

mod table;

use std::collections::BTreeSet;

pub use table::{HERMES_CORE_TOOLS, LEGACY_TOOLSETS, TOOLSETS, Toolset};

/// The prefix of an MCP server's toolset (`mcp-<server>`).
pub const MCP_TOOLSET_PREFIX: &str = "mcp-";
/// The list entry that turns every MCP server off for a platform.
pub const NO_MCP: &str = "no_mcp";
/// Our name for every MCP server's tools at once.
pub const ALL_MCP: &str = "mcp";

/// The guests' default: asking the user, a to-do list, reading skills, and the read-only web
/// and vision toolsets (empty in hermesd today, named so a future tool there is a guest's too).
pub const DEFAULT_GUEST_TOOLS: &[&str] = &[
    "clarify",
    "todo",
    "skills_list",
    "skill_view",
    "web",
    "vision",
];

/// The guests' default list as owned names.
pub fn default_guest_tools() -> Vec<String> {
    DEFAULT_GUEST_TOOLS
        .iter()
        .map(|n| (*n).to_owned())
        .collect()
}

pub fn get_toolset(name: &str) -> Option<&'static Toolset> {
    TOOLSETS.iter().find(|t| t.name == name)
}

/// Whether `name` is a toolset (`all` and `*` stand for every toolset).
pub fn is_valid_toolset(name: &str) -> bool {
    name == "all" || name == "*" || get_toolset(name).is_some()
}

/// The tools an old toolset name stood for, when `name` is one.
pub fn legacy_tools(name: &str) -> Option<&'static [&'static str]> {
    LEGACY_TOOLSETS
        .iter()
        .find(|(legacy, _)| *legacy == name)
        .map(|(_, tools)| *tools)
}

/// All tool names in a toolset, following includes (cycles and diamonds resolve once).
pub fn resolve_toolset(name: &str) -> BTreeSet<String> {
    let mut visited = BTreeSet::new();
    resolve_into(name, &mut visited)
}

fn resolve_into(name: &str, visited: &mut BTreeSet<String>) -> BTreeSet<String> {
    if name == "all" || name == "*" {
        return TOOLSETS
            .iter()
            .flat_map(|t| resolve_into(t.name, &mut visited.clone()))
            .collect();
    }
    if !visited.insert(name.to_owned()) {
        return BTreeSet::new();
    }
    let Some(toolset) = get_toolset(name) else {
        return BTreeSet::new();
    };
    let mut tools: BTreeSet<String> = toolset.tools.iter().map(|t| (*t).to_owned()).collect();
    for included in toolset.includes {
        tools.extend(resolve_into(included, visited));
    }
    tools
}

/// The name of `platform`'s own preset, whether or not the table has it.
pub fn preset_name(platform: &str) -> String {
    match platform {
        "api_server" => "hermes-api-server".to_owned(),
        "whatsapp_cloud" => "hermes-whatsapp".to_owned(),
        "wecom_callback" => "hermes-wecom-callback".to_owned(),
        other => format!("hermes-{other}"),
    }
}

/// Whether `name` may appear in a toolset list, given the configured MCP servers.
pub fn is_known(name: &str, mcp_servers: &BTreeSet<String>) -> bool {
    is_valid_toolset(name)
        || legacy_tools(name).is_some()
        || name == NO_MCP
        || name == ALL_MCP
        || mcp_servers.contains(name)
        || name
            .strip_prefix(MCP_TOOLSET_PREFIX)
            .is_some_and(|server| mcp_servers.contains(server))
}

/// Whether `name` means something in a guest list: a toolset, a tool of one, or an MCP
/// server (`servers` are the configured ones).
pub fn is_known_entry(name: &str, servers: &BTreeSet<String>) -> bool {
    name == ALL_MCP || is_known(name, servers) || resolve_toolset("all").contains(name)
}
