//! The registry entries of the web tools (`tools::web`): kept apart from that module so the
//! tool context can hold the web settings without an import circle.

use serde_json::Value;

use super::context::ToolCtx;
use super::error::ToolError;
use super::registry::{ToolEntry, check_fn, handler};

/// The two tool entries; each is hidden while its backend is not configured.
pub fn entries() -> Vec<ToolEntry> {
    vec![
        ToolEntry::new(
            "web_search",
            "web",
            super::web::search::schema(),
            handler(|ctx: ToolCtx, args: Value| async move {
                Ok::<_, ToolError>(super::web::search::run(&ctx.web, &args).await.to_string())
            }),
        )
        .with_emoji("🔍")
        .with_check(check_fn(|ctx: &ToolCtx| ctx.web.config.search.is_some())),
        ToolEntry::new(
            "web_extract",
            "web",
            super::web::extract::schema(),
            handler(|ctx: ToolCtx, args: Value| async move {
                let cache = ctx.home.web_cache_dir();
                Ok::<_, ToolError>(
                    super::web::extract::run(&ctx.web, &cache, &args)
                        .await
                        .to_string(),
                )
            }),
        )
        .with_emoji("📄")
        .with_check(check_fn(|ctx: &ToolCtx| ctx.web.config.extract.is_some())),
    ]
}
