//! The commands that only tell: `/help`, `/commands` (with the platform's skills as
//! commands), `/version` and `/whoami`. Anyone admitted may run them, mid-turn too.

use hermes_adapter::MessageEvent;

use super::{COMMANDS, CommandCtx, Reply, help_text, is_known};
use crate::gateway::router::Router;

pub(super) fn apply(ctx: &CommandCtx<'_>) -> Reply {
    let event = &ctx.job.event;
    Reply::Text(match ctx.command.name.as_str() {
        "help" => help_text(),
        "commands" => commands_text(ctx.router, event, &ctx.command.args),
        "version" => format!(
            "hermesd {} (Hermes gateway compatible)",
            env!("CARGO_PKG_VERSION")
        ),
        _ => whoami_text(event),
    })
}

pub(super) fn commands_text(router: &Router, event: &MessageEvent, args: &str) -> String {
    const PER_PAGE: usize = 20;
    let skills = router.platform_skills(&event.source.platform);
    let mut entries: Vec<(String, String)> = COMMANDS
        .iter()
        .map(|(n, d)| ((*n).to_owned(), (*d).to_owned()))
        .collect();
    for skill in &skills {
        if let Some(slug) = crate::skills::command::slug(&skill.name)
            && !is_known(&slug)
        {
            let description = match skill.short_description() {
                d if d.is_empty() => "Skill".to_owned(),
                d => format!("Skill: {d}"),
            };
            entries.push((slug, description));
        }
    }
    let pages = entries.len().div_ceil(PER_PAGE);
    let page = match args.trim() {
        "" => 1,
        n => match n.parse::<usize>() {
            Ok(n) if (1..=pages).contains(&n) => n,
            _ => return "Usage: `/commands [page]`".to_owned(),
        },
    };
    let mut text = format!("📋 Commands (page {page}/{pages})\n");
    for (name, description) in entries.iter().skip((page - 1) * PER_PAGE).take(PER_PAGE) {
        text.push_str(&format!("\n/{name} — {description}"));
    }
    text
}

fn whoami_text(event: &MessageEvent) -> String {
    let source = &event.source;
    format!(
        "👤 **You:** {} (ID: {})\n**Platform:** {}\n**Chat:** {} ({})",
        source.user_name.as_deref().unwrap_or("unknown"),
        source.user_id.as_deref().unwrap_or("unknown"),
        source.platform,
        source.chat_id,
        source.chat_type.as_str()
    )
}
