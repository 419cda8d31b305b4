//! `/compress [focus]` and `/compress here [N]`: summarise this chat's conversation now
//! instead of when the context window fills. A focus asks the summary to keep what
//! concerns it; `here N` keeps the last N exchanges (2 by default) word for word. The
//! conversation goes on in a child session holding the summary, as after an automatic
//! compression.

use super::{CommandCtx, Reply};
use crate::agent::Compressed;
use tokio_util::sync::CancellationToken;

/// History shorter than this is not worth a model call.
const MIN_MESSAGES: usize = 4;
const DEFAULT_KEEP: usize = 2;

/// What was asked: a focus for a whole compression, or how many exchanges `here` keeps.
#[derive(Debug, PartialEq, Eq)]
enum Request {
    Whole { focus: Option<String> },
    Here { keep: usize },
}

fn parse(args: &str) -> Result<Request, String> {
    let args = args.trim();
    let mut words = args.split_whitespace();
    if words.next().is_some_and(|w| w.eq_ignore_ascii_case("here")) {
        let keep = match (words.next(), words.next()) {
            (None, _) => DEFAULT_KEEP,
            (Some(n), None) => n
                .parse::<usize>()
                .ok()
                .filter(|n| *n >= 1)
                .ok_or_else(|| format!("`{n}` is not a number of exchanges (1 or more)"))?,
            (Some(_), Some(_)) => return Err("`here` takes one number".to_owned()),
        };
        return Ok(Request::Here { keep });
    }
    Ok(Request::Whole {
        focus: (!args.is_empty()).then(|| args.to_owned()),
    })
}

pub(super) async fn apply(ctx: &CommandCtx<'_>) -> Reply {
    let request = match parse(&ctx.command.args) {
        Ok(request) => request,
        Err(why) => {
            return Reply::Text(format!(
                "{why}. Usage: `/compress [focus]` or `/compress here [N]`."
            ));
        }
    };
    let router = ctx.router;
    let live = router.live();
    let Ok(deps) = &live.agent else {
        return Reply::Text("No model is configured, so nothing can be summarised.".to_owned());
    };
    if router.sessions.current_session_id(&ctx.slot.key).is_none() {
        return Reply::Text(not_enough());
    }
    let source = &ctx.job.event.source;
    let prepared = router
        .sessions
        .prepare_agent(&live.config, ctx.slot, source, deps, false, None)
        .await;
    let mut agent = match prepared {
        Ok(prepared) => prepared.agent,
        Err(e) => {
            tracing::warn!(session_key = %ctx.slot.key, error = %e, "/compress could not load the session");
            return Reply::Text("⚠️ Could not load this chat's session to compress it.".into());
        }
    };
    agent.set_model(router.sessions.model_choice(&ctx.slot.key).as_ref());
    if agent.history().len() < MIN_MESSAGES {
        ctx.slot.lock().agent = Some(agent);
        return Reply::Text(not_enough());
    }
    let (focus, keep) = match &request {
        Request::Whole { focus } => (focus.as_deref(), None),
        Request::Here { keep } => (None, Some(*keep)),
    };
    let result = agent
        .compress_now(focus, keep, &CancellationToken::new())
        .await;
    let text = match result {
        Ok(Some(done)) => {
            let moved = router
                .sessions
                .repoint(&ctx.slot.key, source, agent.session_id(), false)
                .await;
            if let Err(e) = moved {
                tracing::warn!(session_key = %ctx.slot.key, error = %e, "/compress could not point the chat at its new session");
            }
            done_text(&done)
        }
        Ok(None) => not_enough(),
        Err(e) => {
            tracing::warn!(session_key = %ctx.slot.key, error = %e, "/compress failed");
            "⚠️ The summary could not be made (the model call failed); the conversation is \
             unchanged."
                .to_owned()
        }
    };
    ctx.slot.lock().agent = Some(agent);
    Reply::Text(text)
}

fn not_enough() -> String {
    "Not enough conversation to compress yet (it needs at least a few exchanges).".to_owned()
}

fn done_text(done: &Compressed) -> String {
    format!(
        "🗜️ Compressed: {} messages became {} ({} summarised); about {} tokens became {}.",
        done.messages.0, done.messages.1, done.summarised, done.tokens.0, done.tokens.1
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn focus_and_here_forms() {
        assert_eq!(parse("").unwrap(), Request::Whole { focus: None });
        assert_eq!(
            parse(" the database schema ").unwrap(),
            Request::Whole {
                focus: Some("the database schema".into())
            }
        );
        assert_eq!(parse("here").unwrap(), Request::Here { keep: 2 });
        assert_eq!(parse("HERE 5").unwrap(), Request::Here { keep: 5 });
        assert!(parse("here 0").unwrap_err().contains("`0`"));
        assert!(parse("here x").is_err());
        assert!(parse("here 1 2").is_err());
    }
}
