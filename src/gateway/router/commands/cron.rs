//! `/cron`: the scheduled jobs that belong to this chat (created here, or delivering here),
//! answered without the model. Changing them is the agent's `cronjob` tool or
//! `hermesd cron` on the host.

use hermes_adapter::MessageEvent;

use super::{CommandCtx, Reply};
use crate::cron::ops::{Jobs, summary};
use crate::cron::{JobRecord, Zone};
use crate::gateway::router::Router;

fn belongs_to(job: &JobRecord, platform: &str, chat_id: &str) -> bool {
    let from_here = job.origin().is_some_and(|o| {
        o.get("platform").and_then(|v| v.as_str()) == Some(platform)
            && match o.get("chat_id") {
                Some(serde_json::Value::String(id)) => id == chat_id,
                Some(serde_json::Value::Number(id)) => id.to_string() == chat_id,
                _ => false,
            }
    });
    let to_here = job.deliver().split(',').any(|part| {
        let mut pieces = part.trim().splitn(3, ':');
        pieces.next() == Some(platform) && pieces.next() == Some(chat_id)
    });
    from_here || to_here
}

pub(super) async fn apply(ctx: &CommandCtx<'_>) -> Reply {
    Reply::Text(cron_text(ctx.router, &ctx.job.event).await)
}

async fn cron_text(router: &Router, event: &MessageEvent) -> String {
    let config = router.live().config.clone();
    let zone = Zone::parse(&config.cron.timezone).unwrap_or(Zone::Host);
    let home = router.home.clone();
    // With `state.backend: postgres` these are the jobs every instance shares.
    let listed = tokio::task::spawn_blocking(move || {
        let store = crate::cron::shared::open_store(&home, &config)?;
        Jobs::new(store, zone).list()
    })
    .await;
    let all = match listed {
        Ok(Ok(all)) => all,
        Ok(Err(e)) => return format!("⚠️ The scheduled jobs cannot be read: {e}"),
        Err(_) => return "⚠️ The scheduled jobs cannot be read right now.".into(),
    };
    let source = &event.source;
    let mine: Vec<String> = all
        .iter()
        .filter(|job| belongs_to(job, &source.platform, &source.chat_id))
        .map(summary)
        .collect();
    if mine.is_empty() {
        return "No scheduled jobs for this chat. Ask me to schedule something (\"every morning at 8, summarise…\").".into();
    }
    format!(
        "⏰ Scheduled jobs for this chat ({}):\n{}\n\nAsk me to change, pause or remove one.",
        mine.len(),
        mine.join("\n")
    )
}
