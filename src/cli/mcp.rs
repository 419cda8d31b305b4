//! `hermesd mcp list [--json]`: connects to every configured MCP server once (in parallel,
//! each within its `connect_timeout`), and prints its transport, state and tools. Exit 1
//! when an enabled server could not be reached, 78 on an invalid configuration.

use std::collections::BTreeMap;
use std::io::Write;

use clap::Subcommand;

use super::format::table;
use super::{EXIT_FAILURE, small_runtime};
use crate::home::HermesHome;
use crate::tools::mcp::ServerState;
use crate::tools::mcp::probe::probe_all;

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Connect to each configured server and list its state and tools.
    List {
        #[arg(long)]
        json: bool,
    },
}

pub fn run(home: &HermesHome, env: &BTreeMap<String, String>, command: McpCommand) -> i32 {
    let McpCommand::List { json } = command;
    let mut err = std::io::stderr().lock();
    let loaded = match super::config_cmd::loaded_or_report(home, env, &mut err) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let servers = &loaded.config.mcp_servers;
    let net = crate::agent::assembly::mcp_net(&loaded.config);
    let runtime = match small_runtime() {
        Ok(runtime) => runtime,
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            return EXIT_FAILURE;
        }
    };
    let results = runtime.block_on(probe_all(servers, &net, &loaded.env));
    let mut out = std::io::stdout().lock();
    let text = if json {
        serde_json::to_string_pretty(&results).unwrap_or_default() + "\n"
    } else if results.is_empty() {
        "no MCP servers configured (mcp_servers: in config.yaml)\n".to_owned()
    } else {
        let rows: Vec<Vec<String>> = results
            .iter()
            .map(|(name, result)| {
                let status = &result.status;
                let detail = match &status.error {
                    Some(error) => error.clone(),
                    None => status.tools.join(", "),
                };
                vec![
                    name.clone(),
                    status.transport.to_owned(),
                    serde_json::to_value(status.state)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default(),
                    status.tools.len().to_string(),
                    detail,
                ]
            })
            .collect();
        table(&["SERVER", "TRANSPORT", "STATE", "TOOLS", "DETAIL"], &rows)
    };
    let _ = out.write_all(crate::logging::mask(&text).as_bytes());
    let unreachable = results
        .values()
        .any(|r| r.status.state == ServerState::Failed);
    if unreachable { EXIT_FAILURE } else { 0 }
}
