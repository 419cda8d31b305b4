//! What a guest's turn may use (`gateway.guest_tools`): a guest is admitted only because
//! their group chat is allowed, so by default their turns get no tool that runs commands,
//! writes files, schedules work, reaches MCP servers, delegates, writes the shared memory or
//! reads other sessions. The operator may name more toolsets or tools; the list only ever
//! narrows what the platform offers.

use super::resolve_toolset;
use crate::config::toolset_names::MCP_TOOLSET_PREFIX;
pub use crate::config::toolset_names::{DEFAULT_GUEST_TOOLS, default_guest_tools, is_known_entry};

/// Whether `entries` (toolset names, tool names, or MCP servers by name, `mcp-<name>` or
/// `mcp` for all) select `tool`, which belongs to `toolset`.
pub fn allows(entries: &[String], tool: &str, toolset: Option<&str>) -> bool {
    entries.iter().any(|entry| {
        entry == tool
            || toolset == Some(entry.as_str())
            || toolset
                .and_then(|t| t.strip_prefix(MCP_TOOLSET_PREFIX))
                .is_some_and(|server| entry == "mcp" || entry == server)
            || resolve_toolset(entry).contains(tool)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn the_default_withholds_commands_writes_cron_mcp_and_delegation() {
        let default = default_guest_tools();
        for tool in ["clarify", "todo", "skill_view", "skills_list"] {
            assert!(allows(&default, tool, None), "{tool}");
        }
        // Guests get the web tools (their URLs pass the SSRF guard, SECURITY.md).
        for tool in ["web_search", "web_extract"] {
            assert!(allows(&default, tool, Some("web")), "{tool}");
        }
        for (tool, toolset) in [
            ("terminal", "terminal"),
            ("process", "terminal"),
            ("write_file", "file"),
            ("patch", "file"),
            ("read_file", "file"),
            ("cronjob", "cronjob"),
            ("delegate_task", "delegation"),
            ("memory", "memory"),
            ("session_search", "session_search"),
            ("skill_manage", "skills"),
            ("search", "mcp-github"),
        ] {
            assert!(!allows(&default, tool, Some(toolset)), "{tool}");
        }
    }

    #[test]
    fn toolsets_tools_and_mcp_servers_can_be_opted_in() {
        let opted = names(&["terminal", "read_file", "github"]);
        assert!(allows(&opted, "process", Some("terminal")));
        assert!(allows(&opted, "read_file", Some("file")));
        assert!(!allows(&opted, "write_file", Some("file")));
        assert!(allows(&opted, "search", Some("mcp-github")));
        assert!(!allows(&opted, "search", Some("mcp-jira")));
        assert!(allows(&names(&["mcp"]), "search", Some("mcp-jira")));
        let servers = ["github".to_owned()].into();
        for known in [
            "terminal",
            "read_file",
            "github",
            "mcp-github",
            "mcp",
            "web",
        ] {
            assert!(is_known_entry(known, &servers), "{known}");
        }
        assert!(!is_known_entry("shell", &servers));
    }
}
