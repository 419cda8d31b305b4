//! The MCP servers in `hermesd doctor`: each stdio server's command must exist on the PATH
//! its process gets, and (unless `--offline`) each enabled server must answer `initialize`
//! within the doctor's timeout.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::check::Check;
use crate::config::{LoadedConfig, McpTransport};
use crate::tools::mcp::ServerState;
use crate::tools::mcp::probe::probe;

pub fn checks(loaded: &LoadedConfig, offline: bool, timeout: Duration) -> Vec<Check> {
    let servers = &loaded.config.mcp_servers;
    let mut checks = Vec::new();
    let mut to_probe = Vec::new();
    for (name, config) in servers {
        let key = format!("mcp_servers.{name}");
        if !config.enabled {
            checks.push(Check::skip(&key, "disabled (enabled: false)"));
            continue;
        }
        match &config.transport {
            McpTransport::Stdio { command, .. } => {
                let path = loaded
                    .env
                    .get("PATH")
                    .map(String::as_str)
                    .unwrap_or_default();
                if find_command(command, path).is_none() {
                    checks.push(
                        Check::error(&key, format!("command '{command}' not found")).hint(
                            "install it, or give its full path in mcp_servers.<name>.command",
                        ),
                    );
                    continue;
                }
            }
            McpTransport::Http { .. } | McpTransport::Sse { .. } => {}
        }
        if offline {
            checks.push(Check::skip(&key, "not connected (--offline)"));
        } else {
            let mut config = config.clone();
            config.connect_timeout = config.connect_timeout.min(timeout);
            to_probe.push((name.clone(), key, config));
        }
    }
    if to_probe.is_empty() {
        return checks;
    }
    let net = crate::agent::assembly::mcp_net(&loaded.config);
    let runtime = match super::super::small_runtime() {
        Ok(runtime) => runtime,
        Err(e) => {
            checks.push(Check::warn("mcp_servers", format!("not checked: {e}")));
            return checks;
        }
    };
    let probed = runtime.block_on(futures_util::future::join_all(to_probe.iter().map(
        |(name, key, config)| async {
            let result = probe(name, config, &net, &loaded.env).await;
            (key.clone(), result)
        },
    )));
    for (key, result) in probed {
        let status = result.status;
        checks.push(match status.state {
            ServerState::Connected => Check::ok(
                key,
                format!("answers initialize; {} tool(s)", status.tools.len()),
            ),
            _ => Check::warn(
                key,
                status.error.unwrap_or_else(|| "not reachable".to_owned()),
            )
            .hint("the gateway keeps retrying it; its tools are missing until it answers"),
        });
    }
    checks
}

/// `command` as the child's PATH resolves it (a name with a slash is taken as a path).
fn find_command(command: &str, path: &str) -> Option<PathBuf> {
    let executable = |candidate: &Path| {
        use std::os::unix::fs::PermissionsExt;
        candidate
            .metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if command.contains('/') {
        let candidate = PathBuf::from(command);
        return executable(&candidate).then_some(candidate);
    }
    std::env::split_paths(path)
        .map(|dir| dir.join(command))
        .find(|candidate| executable(candidate))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_resolve_on_the_given_path_only() {
        assert!(find_command("sh", "/bin:/usr/bin").is_some());
        assert!(find_command("sh", "/nonexistent").is_none());
        assert!(find_command("/bin/sh", "").is_some());
        assert!(find_command("/no/such/binary", "/bin").is_none());
    }
}
