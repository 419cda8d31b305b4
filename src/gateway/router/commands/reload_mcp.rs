//! `/reload-mcp`: reconnect every MCP server now and read config.yaml again, so servers
//! added or changed there since start come up without a restart. Reconnecting changes the
//! tools the model is offered, which costs the provider's prompt cache on the next message,
//! so it is confirmed first (`/reload-mcp now`) unless `approvals.mcp_reload_confirm: false`.
//! It acts for every chat: allowed users only.

use super::{CommandCtx, Reply};
use crate::gateway::router::authority::Gate;

pub(super) fn gate() -> Gate {
    Gate::AllowedUsersOnly("it restarts the MCP servers every chat uses")
}

pub(super) fn apply(ctx: &CommandCtx<'_>) -> Reply {
    let confirmed = matches!(
        ctx.command.args.trim().to_lowercase().as_str(),
        "now" | "yes" | "confirm"
    );
    if ctx.router.live().config.approvals.mcp_reload_confirm && !confirmed {
        return Reply::Text(
            "🔌 This reconnects every MCP server and re-reads config.yaml. The tool list \
             changes, so the next message is sent without the provider's prompt cache. Send \
             `/reload-mcp now` to go ahead (set `approvals.mcp_reload_confirm: false` to skip \
             this question)."
                .to_owned(),
        );
    }
    let count = crate::gateway::router::live::reload_mcp(ctx.router);
    tracing::info!(servers = count, "MCP servers reconnecting (/reload-mcp)");
    Reply::Text(match count {
        0 => "🔌 No MCP servers are configured; config.yaml is being read again, so servers \
              added there start now."
            .to_owned(),
        n => format!(
            "🔌 Reconnecting {n} MCP server(s) and re-reading config.yaml. Their tools are \
             offered again as each one connects."
        ),
    })
}
