//! `mcp_servers:` — the Model Context Protocol servers whose tools the agent may call, in the
//! Hermes layout (`tools/mcp_tool.py`): one mapping per server, `command`/`args`/`env` for a
//! child process speaking stdio, or `url`/`headers` for Streamable HTTP (`transport: sse` for
//! the legacy SSE transport), with per-server timeouts and tool filters.
//!
//! A server with a `url` is an HTTP server even when it also names a `command`, as in Hermes.
//! Keys Hermes reads that hermesd does not act on (keep-alive, recycling, elicitation, OAuth,
//! client certificates, ...) are accepted and reported in the "not supported yet" warning.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use super::known_keys::{IGNORED_MCP_SERVER, join};
use super::parse::{Issues, at, kind};
use super::secret::Secret;

/// Hermes's default per-call timeout (`_DEFAULT_TOOL_TIMEOUT`).
pub const DEFAULT_MCP_TIMEOUT: Duration = Duration::from_secs(300);
/// Hermes's default connection timeout (`_DEFAULT_CONNECT_TIMEOUT`).
pub const DEFAULT_MCP_CONNECT_TIMEOUT: Duration = Duration::from_secs(60);

/// The keys of one server entry hermesd reads.
const READ_KEYS: &[&str] = &[
    "command",
    "args",
    "env",
    "url",
    "headers",
    "transport",
    "timeout",
    "connect_timeout",
    "enabled",
    "tools",
    "sampling",
];

/// How hermesd reaches one server.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "transport", rename_all = "snake_case")]
pub enum McpTransport {
    /// A child process speaking JSON-RPC on its stdin/stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        /// Values are shown as `***`: they are usually credentials.
        env: BTreeMap<String, Secret>,
    },
    /// Streamable HTTP (the current remote transport).
    Http {
        url: String,
        headers: BTreeMap<String, Secret>,
    },
    /// The legacy HTTP+SSE transport (`transport: sse`).
    Sse {
        url: String,
        headers: BTreeMap<String, Secret>,
    },
}

/// One validated `mcp_servers.<name>` entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpServerConfig {
    #[serde(flatten)]
    pub transport: McpTransport,
    /// Per tool call.
    #[serde(with = "secs")]
    pub timeout: Duration,
    /// For the connection and the `initialize` handshake together.
    #[serde(with = "secs")]
    pub connect_timeout: Duration,
    pub enabled: bool,
    /// `tools.include`: when not empty, only these tools (by the server's names).
    pub include: Vec<String>,
    /// `tools.exclude`: these tools are left out (ignored when `include` is set).
    pub exclude: Vec<String>,
    /// `tools.resources`: the list/read resource helper tools (when the server has resources).
    pub resources: bool,
    /// `tools.prompts`: the list/get prompt helper tools (when the server has prompts).
    pub prompts: bool,
    /// `sampling`: the server's requests for completions by our model.
    pub sampling: super::mcp_sampling::McpSampling,
}

impl McpServerConfig {
    /// Whether the tool the server calls `name` is offered to the model.
    pub fn selects(&self, name: &str) -> bool {
        if !self.include.is_empty() {
            return self.include.iter().any(|n| n == name);
        }
        !self.exclude.iter().any(|n| n == name)
    }
}

mod secs {
    use std::time::Duration;

    pub fn serialize<S: serde::Serializer>(value: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(value.as_secs_f64())
    }
}

/// Validates `mcp_servers:` (null or absent: no servers).
pub fn mcp_servers(
    issues: &mut Issues,
    value: Option<&Value>,
) -> BTreeMap<String, McpServerConfig> {
    let mut servers = BTreeMap::new();
    let Some(value) = value.filter(|v| !v.is_null()) else {
        return servers;
    };
    let Some(map) = value.as_object() else {
        issues.error(
            "mcp_servers",
            format!("expected a mapping of server names, got {}", kind(value)),
        );
        return servers;
    };
    for (name, entry) in map {
        let key = format!("mcp_servers.{name}");
        if name.trim().is_empty() {
            issues.error(&key, "a server needs a non-empty name");
            continue;
        }
        let Some(entry) = entry.as_object() else {
            issues.error(&key, format!("expected a mapping, got {}", kind(entry)));
            continue;
        };
        if let Some(server) = server(issues, &key, entry) {
            servers.insert(name.clone(), server);
        }
    }
    servers
}

fn server(
    issues: &mut Issues,
    prefix: &str,
    entry: &serde_json::Map<String, Value>,
) -> Option<McpServerConfig> {
    let field = |name: &str| at(join(prefix, name), entry.get(name));
    for (key, value) in entry {
        if READ_KEYS.contains(&key.as_str()) {
            continue;
        }
        if IGNORED_MCP_SERVER.contains(&key.as_str()) {
            if super::unsupported::is_set(value) {
                issues.ignored.push(join(prefix, key));
            }
        } else {
            issues.warn(format!("unknown key '{}'", join(prefix, key)));
        }
    }
    let positive = |n: f64| n > 0.0;
    let timeout = issues.float(
        field("timeout"),
        DEFAULT_MCP_TIMEOUT.as_secs_f64(),
        positive,
        "a positive number of seconds",
    );
    let connect_timeout = issues.float(
        field("connect_timeout"),
        DEFAULT_MCP_CONNECT_TIMEOUT.as_secs_f64(),
        positive,
        "a positive number of seconds",
    );
    let enabled = issues.bool(field("enabled"), true);
    let filters = filters(issues, prefix, entry.get("tools"));
    let sampling = super::mcp_sampling::sampling(issues, prefix, entry.get("sampling"));
    let transport = transport(issues, prefix, entry)?;
    Some(McpServerConfig {
        transport,
        timeout: Duration::from_secs_f64(timeout),
        connect_timeout: Duration::from_secs_f64(connect_timeout),
        enabled,
        include: filters.include,
        exclude: filters.exclude,
        resources: filters.resources,
        prompts: filters.prompts,
        sampling,
    })
}

fn transport(
    issues: &mut Issues,
    prefix: &str,
    entry: &serde_json::Map<String, Value>,
) -> Option<McpTransport> {
    let field = |name: &str| at(join(prefix, name), entry.get(name));
    let kind_name = issues.string(field("transport"));
    if let Some(url_leaf) = field("url") {
        let url = issues.url(Some(url_leaf))?;
        let headers = string_map(issues, &join(prefix, "headers"), entry.get("headers"));
        if field("command").is_some() {
            issues.warn(format!(
                "{prefix}: has both 'url' and 'command'; the url is used and the command is not run"
            ));
        }
        return match kind_name.as_deref().map(str::to_ascii_lowercase).as_deref() {
            Some("sse") => Some(McpTransport::Sse { url, headers }),
            None | Some("http" | "streamable_http" | "streamable-http") => {
                Some(McpTransport::Http { url, headers })
            }
            Some(other) => {
                issues.error(
                    join(prefix, "transport"),
                    format!("expected 'sse' or 'streamable-http' for a url, got '{other}'"),
                );
                None
            }
        };
    }
    let Some(command) = issues.string(field("command")) else {
        issues.error(
            prefix,
            "needs 'command' (a program speaking MCP on stdio) or 'url' (an HTTP server)",
        );
        return None;
    };
    let args = issues.list(field("args"), false).unwrap_or_default();
    let env = string_map(issues, &join(prefix, "env"), entry.get("env"));
    Some(McpTransport::Stdio { command, args, env })
}

/// A mapping of names to text (`env`, `headers`); values become secrets.
fn string_map(issues: &mut Issues, key: &str, value: Option<&Value>) -> BTreeMap<String, Secret> {
    let mut out = BTreeMap::new();
    let Some(value) = value.filter(|v| !v.is_null()) else {
        return out;
    };
    let Some(map) = value.as_object() else {
        issues.error(key, format!("expected a mapping, got {}", kind(value)));
        return out;
    };
    for (name, item) in map {
        match item {
            Value::String(text) => {
                out.insert(name.clone(), Secret::new(text.clone()));
            }
            Value::Number(_) | Value::Bool(_) => {
                out.insert(name.clone(), Secret::new(item.to_string()));
            }
            Value::Null => {}
            other => issues.error(
                join(key, name),
                format!("expected text, got {}", kind(other)),
            ),
        }
    }
    out
}

/// What `tools:` selects.
struct Filters {
    include: Vec<String>,
    exclude: Vec<String>,
    resources: bool,
    prompts: bool,
}

/// `tools.include` / `tools.exclude` (a name or a list of names), `tools.resources` and
/// `tools.prompts` (on by default).
fn filters(issues: &mut Issues, prefix: &str, tools: Option<&Value>) -> Filters {
    let key = join(prefix, "tools");
    let mut filters = Filters {
        include: Vec::new(),
        exclude: Vec::new(),
        resources: true,
        prompts: true,
    };
    let Some(tools) = tools.filter(|v| !v.is_null()) else {
        return filters;
    };
    let Some(map) = tools.as_object() else {
        issues.error(&key, format!("expected a mapping, got {}", kind(tools)));
        return filters;
    };
    for name in map.keys() {
        if !["include", "exclude", "resources", "prompts"].contains(&name.as_str()) {
            issues.warn(format!("unknown key '{}'", join(&key, name)));
        }
    }
    let field = |name: &str| at(join(&key, name), map.get(name));
    filters.include = issues.list(field("include"), false).unwrap_or_default();
    filters.exclude = issues.list(field("exclude"), false).unwrap_or_default();
    filters.resources = issues.bool(field("resources"), true);
    filters.prompts = issues.bool(field("prompts"), true);
    filters
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(value: Value) -> (BTreeMap<String, McpServerConfig>, Issues) {
        let mut issues = Issues::default();
        let servers = mcp_servers(&mut issues, Some(&value));
        (servers, issues)
    }

    #[test]
    fn stdio_and_http_servers_with_the_hermes_defaults() {
        let (servers, issues) = check(json!({
            "fs": {"command": "npx", "args": ["-y", "server-fs", "/tmp"], "env": {"A": "b"}},
            "remote": {"url": "https://mcp.example.com/mcp",
                       "headers": {"Authorization": "Bearer sk-1"}, "timeout": 180},
            "old": {"url": "http://localhost:8000/sse", "transport": "sse", "connect_timeout": 10},
        }));
        assert!(issues.errors.is_empty(), "{:?}", issues.errors);
        let fs = &servers["fs"];
        assert_eq!(fs.timeout, DEFAULT_MCP_TIMEOUT);
        assert_eq!(fs.connect_timeout, DEFAULT_MCP_CONNECT_TIMEOUT);
        assert!(fs.enabled);
        match &fs.transport {
            McpTransport::Stdio { command, args, env } => {
                assert_eq!(command, "npx");
                assert_eq!(args, &["-y", "server-fs", "/tmp"]);
                assert_eq!(env["A"].expose(), "b");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(servers["remote"].timeout, Duration::from_secs(180));
        assert!(matches!(
            servers["remote"].transport,
            McpTransport::Http { .. }
        ));
        assert!(matches!(servers["old"].transport, McpTransport::Sse { .. }));
        assert_eq!(servers["old"].connect_timeout, Duration::from_secs(10));
        let shown = serde_json::to_string(&servers["remote"]).unwrap();
        assert!(!shown.contains("sk-1"), "{shown}");
    }

    #[test]
    fn every_bad_value_is_named_by_its_key() {
        let (servers, issues) = check(json!({
            "a": {"args": ["x"]},
            "b": {"command": "x", "timeout": 0, "enabled": "maybe", "env": {"K": [1]}},
            "c": {"url": "ftp://host"},
            "d": "not a mapping",
            "e": {"url": "http://h/mcp", "transport": "carrier-pigeon"},
        }));
        let errors: Vec<String> = issues.errors.iter().map(ToString::to_string).collect();
        for key in [
            "mcp_servers.a",
            "mcp_servers.b.timeout",
            "mcp_servers.b.enabled",
            "mcp_servers.b.env.K",
            "mcp_servers.c.url",
            "mcp_servers.d",
            "mcp_servers.e.transport",
        ] {
            assert!(
                errors
                    .iter()
                    .any(|e| e.starts_with(&format!("config error: {key}:"))),
                "{key} not in {errors:#?}"
            );
        }
        assert!(!servers.contains_key("a"));
    }

    #[test]
    fn filters_select_tools_and_unread_hermes_keys_are_reported() {
        let (servers, issues) = check(json!({
            "s": {"command": "x", "tools": {"include": "one", "exclude": ["two"], "prompts": false},
                  "sampling": {"enabled": true}, "keepalive_interval": 10, "colour": "red"},
            "t": {"command": "x", "tools": {"exclude": ["two"]}},
        }));
        assert!(issues.errors.is_empty(), "{:?}", issues.errors);
        assert!(servers["s"].selects("one") && !servers["s"].selects("three"));
        assert!(servers["t"].selects("one") && !servers["t"].selects("two"));
        assert!(!servers["s"].prompts && servers["s"].resources && servers["t"].prompts);
        // sampling is read now; only its tool-round limit is not acted on.
        assert!(
            !issues
                .ignored
                .iter()
                .any(|k| k.starts_with("mcp_servers.s.sampling"))
        );
        assert!(servers["s"].sampling.enabled);
        assert!(
            issues
                .ignored
                .contains(&"mcp_servers.s.keepalive_interval".to_owned())
        );
        assert!(
            issues
                .warnings
                .iter()
                .any(|w| w.contains("mcp_servers.s.colour")),
            "{:?}",
            issues.warnings
        );
    }
}
