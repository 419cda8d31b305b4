//! `/insights [days] [--days N] [--source S]`: what the gateway's sessions used over the
//! last days (30 by default) from state.db — sessions, messages, tool calls, tokens and the
//! estimated cost, by platform and by model. It reads every chat's sessions in aggregate
//! (counts only, no text), so only allowed users may ask.

use std::collections::BTreeMap;

use super::{CommandCtx, Reply};
use crate::gateway::router::authority::Gate;
use crate::state::UsageGroup;

const DEFAULT_DAYS: u32 = 30;
const MAX_DAYS: u32 = 3650;

pub(super) fn gate() -> Gate {
    Gate::AllowedUsersOnly("it sums up the usage of every chat")
}

/// The window and platform asked for.
#[derive(Debug, PartialEq, Eq)]
struct Request {
    days: u32,
    source: Option<String>,
}

fn parse(args: &str) -> Result<Request, String> {
    // Phones turn `--` into a dash: take an em or en dash before a flag as `--`.
    let args = args
        .replace(['\u{2014}', '\u{2013}'], "--")
        .replace("----", "--");
    let mut request = Request {
        days: DEFAULT_DAYS,
        source: None,
    };
    let mut words = args.split_whitespace();
    while let Some(word) = words.next() {
        let days = match word {
            "--days" => words.next().ok_or("`--days` needs a number")?,
            "--source" => {
                let source = words.next().ok_or("`--source` needs a platform name")?;
                request.source = Some(source.to_lowercase());
                continue;
            }
            other if other.chars().all(|c| c.is_ascii_digit()) => other,
            other => return Err(format!("I don't understand `{other}`")),
        };
        request.days = match days.parse::<u32>() {
            Ok(n) if (1..=MAX_DAYS).contains(&n) => n,
            _ => {
                return Err(format!(
                    "`{days}` is not a number of days from 1 to {MAX_DAYS}"
                ));
            }
        };
    }
    Ok(request)
}

pub(super) async fn apply(ctx: &CommandCtx<'_>) -> Reply {
    let request = match parse(&ctx.command.args) {
        Ok(request) => request,
        Err(why) => {
            return Reply::Text(format!(
                "{why}. Usage: `/insights [days] [--days N] [--source platform]`."
            ));
        }
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let since = now - f64::from(request.days) * 86_400.0;
    match ctx
        .router
        .store
        .usage_since(since, request.source.as_deref())
        .await
    {
        Ok(groups) => Reply::Text(report(&request, &groups)),
        Err(e) => Reply::Text(crate::gateway::router::turn::failure::store_error_text(
            &e,
            "/insights",
        )),
    }
}

fn report(request: &Request, groups: &[UsageGroup]) -> String {
    let scope = match &request.source {
        Some(source) => format!("{source}, "),
        None => String::new(),
    };
    let mut lines = vec![format!(
        "📈 **Insights** ({scope}last {} day{})",
        request.days,
        if request.days == 1 { "" } else { "s" }
    )];
    if groups.is_empty() {
        lines.push("No sessions in this window.".to_owned());
        return lines.join("\n");
    }
    let sum = |f: fn(&UsageGroup) -> i64| groups.iter().map(f).sum::<i64>();
    lines.push(format!(
        "Sessions: {} · Messages: {} · Tool calls: {}",
        sum(|g| g.sessions),
        sum(|g| g.messages),
        sum(|g| g.tool_calls)
    ));
    let cost: Option<f64> = groups.iter().filter_map(|g| g.cost).reduce(|a, b| a + b);
    let cost = cost.map_or(String::new(), |c| format!(" · Estimated cost: ${c:.2}"));
    lines.push(format!(
        "Tokens: {} in · {} out{cost}",
        sum(|g| g.input_tokens),
        sum(|g| g.output_tokens)
    ));
    let mut by_source: BTreeMap<&str, i64> = BTreeMap::new();
    let mut by_model: BTreeMap<&str, (i64, i64)> = BTreeMap::new();
    for g in groups {
        *by_source.entry(&g.source).or_default() += g.sessions;
        let model = by_model
            .entry(g.model.as_deref().unwrap_or("(unknown)"))
            .or_default();
        model.0 += g.sessions;
        model.1 += g.input_tokens + g.output_tokens;
    }
    let mut sources: Vec<_> = by_source.into_iter().collect();
    sources.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let sources: Vec<String> = sources.iter().map(|(s, n)| format!("{s} {n}")).collect();
    lines.push(format!("**By platform:** {}", sources.join(", ")));
    let mut models: Vec<_> = by_model.into_iter().collect();
    models.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    lines.push("**By model:**".to_owned());
    for (model, (sessions, tokens)) in models.iter().take(10) {
        lines.push(format!(
            "• `{model}`: {sessions} session(s), {tokens} tokens"
        ));
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_as_hermes_takes_them() {
        assert_eq!(
            parse("").unwrap(),
            Request {
                days: 30,
                source: None
            }
        );
        assert_eq!(parse("7").unwrap().days, 7);
        let both = parse("--days 3 --source Telegram").unwrap();
        assert_eq!(
            both,
            Request {
                days: 3,
                source: Some("telegram".into())
            }
        );
        assert_eq!(parse("\u{2014}days 2").unwrap().days, 2);
        assert!(parse("--days x").unwrap_err().contains("`x`"));
        assert!(parse("0").is_err());
        assert!(parse("--source").is_err());
        assert!(parse("lots").unwrap_err().contains("`lots`"));
    }

    #[test]
    fn the_report_sums_groups_by_platform_and_model() {
        let group = |source: &str, model: &str, sessions: i64, cost: Option<f64>| UsageGroup {
            source: source.into(),
            model: Some(model.into()),
            sessions,
            messages: sessions * 4,
            tool_calls: 1,
            input_tokens: 100,
            output_tokens: 10,
            cost,
        };
        let text = report(
            &Request {
                days: 7,
                source: None,
            },
            &[
                group("telegram", "m1", 3, Some(0.5)),
                group("discord", "m1", 1, None),
                group("telegram", "m2", 2, Some(0.25)),
            ],
        );
        assert!(text.contains("last 7 days"), "{text}");
        assert!(
            text.contains("Sessions: 6 · Messages: 24 · Tool calls: 3"),
            "{text}"
        );
        assert!(
            text.contains("Tokens: 300 in · 30 out · Estimated cost: $0.75"),
            "{text}"
        );
        assert!(
            text.contains("**By platform:** telegram 5, discord 1"),
            "{text}"
        );
        assert!(text.contains("• `m1`: 4 session(s), 220 tokens"), "{text}");
        let empty = report(
            &Request {
                days: 1,
                source: Some("slack".into()),
            },
            &[],
        );
        assert!(
            empty.contains("slack, last 1 day)") && empty.contains("No sessions"),
            "{empty}"
        );
    }
}
