//! `/model`: show the session's model and the configured ones, switch this session to
//! another model (kept in the session's routing entry as Hermes's `model_override`, so a
//! restart keeps it), pick the provider with `--provider` (alone: that provider's
//! configured model), switch for the next message only with `--once` (kept in memory and not
//! persisted, as in Hermes), or with `--global` also make it `model.default` in config.yaml
//! (edited in place, comments kept). A provider no endpoint serves is refused with the list.
//!
//! A name config.yaml does not configure is looked up in the provider's models listing
//! (`model_listing.rs` has the rules, `agent::provider::models_list` the fetch and cache): a
//! listed name switches like a configured one, its record marked `listed` so the endpoint
//! whose listing named it serves it later, after a restart too.

use std::sync::Arc;

use hermes_adapter::MessageEvent;
use serde_json::json;

use super::model_listing::{Lookup, Target};
use super::{CommandCtx, Reply};
use crate::agent::AgentDeps;
use crate::agent::provider::{Endpoint, ModelChoice};
use crate::gateway::router::Router;
use crate::gateway::router::authority::Gate;
use crate::gateway::router::session::{LISTED_FIELD, OVERRIDE_FIELD};
use crate::gateway::router::slot::Slot;
use crate::tools::context::Authority;

const USAGE: &str = "Usage: `/model [name] [--provider <name>] [--once | --global]`";

/// What `/model` was asked to do.
#[derive(Debug, Default, PartialEq)]
struct Request {
    model: Option<String>,
    provider: Option<String>,
    global: bool,
    once: bool,
}

/// Why `/model`'s arguments ask for nothing it can do; the text is the reply.
#[derive(Debug, thiserror::Error)]
enum RequestError {
    #[error("`--provider` needs a provider name.")]
    ProviderNameMissing,
    #[error("`{0}` is not a `/model` option here.\n{USAGE}")]
    UnknownOption(String),
    #[error("{USAGE}")]
    Usage,
    #[error(
        "`--once` and `--global` cannot go together: one is for the next message, the other for every chat."
    )]
    OnceAndGlobal,
    #[error("`/model --once` needs a model or a `--provider`.")]
    OnceWithoutTarget,
}

/// Why no configured endpoint serves what `/model` asked for; the text is the reply.
#[derive(Debug, thiserror::Error)]
enum NotServed {
    #[error(
        "`{provider}` is not a configured provider, so I can't switch to it.\nConfigured providers: {providers}\nProviders are set as `model.provider` or in `fallback_providers` in config.yaml."
    )]
    UnknownProvider { provider: String, providers: String },
    #[error("`{provider}` does not serve `{wanted}` here, so I can't switch to it.\n{listing}")]
    NotByProvider {
        provider: String,
        wanted: String,
        listing: String,
    },
    #[error(
        "`{wanted}` is not a configured model, so I can't switch to it.\n{listing}\nOther models are added as `model.default` or `fallback_providers` in config.yaml."
    )]
    UnknownModel { wanted: String, listing: String },
}

/// Why `--global` could not write `model.default` to config.yaml.
#[derive(Debug, thiserror::Error)]
enum SaveGlobalError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Edit(#[from] crate::config::model_edit::ModelEditError),
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
}

fn parse(args: &str) -> Result<Request, RequestError> {
    let mut request = Request::default();
    let mut words = args.split_whitespace();
    while let Some(word) = words.next() {
        match word {
            "--global" => request.global = true,
            "--once" => request.once = true,
            "--session" => {}
            "--provider" => match words.next() {
                Some(name) if !name.starts_with("--") => request.provider = Some(name.to_owned()),
                _ => return Err(RequestError::ProviderNameMissing),
            },
            flag if flag.starts_with("--provider=") => {
                request.provider = Some(flag["--provider=".len()..].to_owned())
            }
            flag if flag.starts_with("--") => {
                return Err(RequestError::UnknownOption(flag.to_owned()));
            }
            name if request.model.is_none() => request.model = Some(name.to_owned()),
            _ => return Err(RequestError::Usage),
        }
    }
    if request.once && request.global {
        return Err(RequestError::OnceAndGlobal);
    }
    if request.once && request.model.is_none() && request.provider.is_none() {
        return Err(RequestError::OnceWithoutTarget);
    }
    Ok(request)
}

/// The endpoint serving what was asked for, or the reason none does.
fn resolve<'a>(endpoints: &'a [Endpoint], request: &Request) -> Result<&'a Endpoint, NotServed> {
    let provider_matches = |e: &Endpoint, p: &str| e.provider.eq_ignore_ascii_case(p);
    if let Some(provider) = request.provider.as_deref()
        && !endpoints.iter().any(|e| provider_matches(e, provider))
    {
        let mut providers: Vec<String> = endpoints
            .iter()
            .map(|e| format!("`{}`", e.provider))
            .collect();
        providers.dedup();
        return Err(NotServed::UnknownProvider {
            provider: provider.to_owned(),
            providers: providers.join(", "),
        });
    }
    let found = endpoints.iter().find(|e| {
        request.model.as_deref().is_none_or(|m| e.model == m)
            && request
                .provider
                .as_deref()
                .is_none_or(|p| provider_matches(e, p))
    });
    found.ok_or_else(|| {
        let wanted = request.model.clone().unwrap_or_default();
        match request.provider.as_deref() {
            Some(provider) => NotServed::NotByProvider {
                provider: provider.to_owned(),
                wanted,
                listing: listing(endpoints),
            },
            None => NotServed::UnknownModel {
                wanted,
                listing: listing(endpoints),
            },
        }
    })
}

/// `/model … --global` rewrites config.yaml for every chat: allowed users only.
pub(super) fn gate(args: &str) -> Gate {
    if args.split_whitespace().any(|w| w == "--global") {
        Gate::AllowedUsersOnly("it changes the default model of every chat")
    } else {
        Gate::Open
    }
}

pub(super) async fn apply(ctx: &CommandCtx<'_>) -> Reply {
    let (job, args) = (ctx.job, &ctx.command.args);
    Reply::Text(model_command(ctx.router, ctx.slot, &job.event, args, job.authority).await)
}

async fn model_command(
    router: &Router,
    slot: &Arc<Slot>,
    event: &MessageEvent,
    args: &str,
    authority: Authority,
) -> String {
    let deps = match &router.live().agent {
        Ok(deps) => deps.clone(),
        Err(reason) => return format!("No model is configured: {reason}"),
    };
    let request = match parse(args) {
        Ok(request) => request,
        Err(e) => return e.to_string(),
    };
    let endpoints = deps.client.endpoints();
    let current_choice = router
        .sessions
        .model_choice(&slot.key)
        .filter(|c| endpoints.iter().any(|e| c.served_by(e)));
    let current = current_choice
        .as_ref()
        .map(|c| c.model.clone())
        .unwrap_or_else(|| deps.model_name());
    if request.model.is_none() && request.provider.is_none() {
        return format!(
            "**Model:** `{current}`\n{}\nSwitch this chat with `/model <name>` (a configured model or one the provider lists; `--provider <name>` to pick the provider); add `--once` for the next message only, or `--global` to make it the default in config.yaml.",
            listing(endpoints)
        );
    }
    let target = match resolve(endpoints, &request) {
        Ok(endpoint) => Target {
            endpoint: endpoint.clone(),
            listed: false,
            note: None,
        },
        Err(e @ NotServed::UnknownProvider { .. }) => return e.to_string(),
        Err(not_configured) => {
            let Some(wanted) = request.model.as_deref() else {
                return not_configured.to_string();
            };
            let lookup = Lookup {
                client: &deps.client,
                wanted,
                provider: request.provider.as_deref(),
                current_choice: current_choice.as_ref(),
                current: &current,
                authority,
            };
            match lookup.target().await {
                Ok(target) => target,
                Err(refusal) => return format!("{refusal}\n{}", listing(endpoints)),
            }
        }
    };
    let Target {
        endpoint,
        listed,
        note,
    } = target;
    let wanted = endpoint.model.clone();
    let note = note.map(|n| format!("\n{n}")).unwrap_or_default();
    if request.once {
        slot.lock().once_model = Some(ModelChoice {
            model: wanted.clone(),
            provider: Some(endpoint.provider.clone()),
            listed_by: listed.then(|| endpoint.base_url.clone()),
        });
        return format!(
            "✅ Your next message goes to `{wanted}` ({}); after it this chat is back on `{current}`.{note}",
            endpoint.provider
        );
    }
    let saved =
        save_session_model(router, &slot.key, event, &wanted, Some(&endpoint), listed).await;
    if let Err(e) = saved {
        tracing::error!(session_key = %slot.key, error = %e, "cannot save the model choice");
        return "⚠️ The model choice could not be saved; nothing was changed.".to_owned();
    }
    let mut reply = format!(
        "✅ This chat now uses `{wanted}` ({}), was `{current}`.{note}",
        endpoint.provider
    );
    if request.global {
        match save_global(&deps, &router.home.config_yaml(), &endpoint) {
            Ok(()) => reply.push_str(
                "\nSaved as `model.default` in config.yaml: other chats switch after a reload \
                 (`systemctl reload hermesd` or SIGHUP).",
            ),
            Err(e) => {
                tracing::error!(error = %e, "cannot write model.default to config.yaml");
                reply.push_str(&format!(
                    "\n⚠️ config.yaml was not changed ({e}); only this chat switched."
                ));
            }
        }
    }
    reply
}

pub(super) async fn save_session_model(
    router: &Router,
    key: &str,
    event: &MessageEvent,
    model: &str,
    endpoint: Option<&Endpoint>,
    listed: bool,
) -> crate::state::StoreResult<()> {
    let (mut entry, _) = router
        .sessions
        .route(&router.live().config, key, &event.source, false)
        .await?;
    let mut record = json!({"model": model});
    if let Some(endpoint) = endpoint {
        record["provider"] = json!(endpoint.provider);
        record["base_url"] = json!(endpoint.base_url);
        if listed {
            record[LISTED_FIELD] = json!(true);
        }
    }
    entry.set(OVERRIDE_FIELD, record);
    router.routing.save(&router.store, entry).await
}

pub(super) fn listing(endpoints: &[Endpoint]) -> String {
    let mut names: Vec<String> = Vec::new();
    for e in endpoints {
        let name = format!("`{}` ({})", e.model, e.provider);
        if !names.contains(&name) {
            names.push(name);
        }
    }
    format!("Configured models: {}", names.join(", "))
}

/// Sets `model.default` in config.yaml (and `model.provider`/`model.base_url` when another
/// provider than the primary serves the model) by editing just those values, so comments
/// and layout stay; written atomically, keeping the file's mode.
fn save_global(
    deps: &AgentDeps,
    path: &std::path::Path,
    endpoint: &Endpoint,
) -> Result<(), SaveGlobalError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(source) => {
            return Err(SaveGlobalError::Read {
                path: path.to_owned(),
                source,
            });
        }
    };
    let mut values = vec![("default", endpoint.model.as_str())];
    let primary_provider = deps.client.endpoints().first().map(|e| e.provider.as_str());
    if Some(endpoint.provider.as_str()) != primary_provider {
        values.push(("provider", endpoint.provider.as_str()));
        values.push(("base_url", endpoint.base_url.as_str()));
    }
    let out = crate::config::model_edit::set_model_keys(&text, &values)?;
    let mode = file_mode(path);
    crate::tools::approval::write_atomically(path, out.as_bytes(), mode).map_err(|source| {
        SaveGlobalError::Write {
            path: path.to_owned(),
            source,
        }
    })
}

#[cfg(unix)]
pub(super) fn file_mode(path: &std::path::Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .ok()
        .map(|m| m.permissions().mode() & 0o777)
}

#[cfg(not(unix))]
pub(super) fn file_mode(_path: &std::path::Path) -> Option<u32> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse_as_hermes_spells_them() {
        assert_eq!(
            parse("gpt-4o --provider openai --once").unwrap(),
            Request {
                model: Some("gpt-4o".into()),
                provider: Some("openai".into()),
                once: true,
                global: false
            }
        );
        assert_eq!(
            parse("--provider=groq").unwrap().provider.as_deref(),
            Some("groq")
        );
        assert!(parse("--once").is_err());
        assert!(parse("a --once --global").is_err());
        assert!(parse("a --provider").is_err());
        assert!(parse("a --refresh").is_err());
    }

    #[test]
    fn provider_alone_picks_its_configured_model() {
        let endpoints = vec![
            Endpoint::new("openai", "http://a/v1", None, "gpt-4o"),
            Endpoint::new("groq", "http://b/v1", None, "llama-3.3"),
            Endpoint::new("openrouter", "http://c/v1", None, "gpt-4o"),
        ];
        let req = |m: Option<&str>, p: Option<&str>| Request {
            model: m.map(str::to_owned),
            provider: p.map(str::to_owned),
            ..Request::default()
        };
        assert_eq!(
            resolve(&endpoints, &req(None, Some("GROQ"))).unwrap().model,
            "llama-3.3"
        );
        assert_eq!(
            resolve(&endpoints, &req(Some("gpt-4o"), Some("openrouter")))
                .unwrap()
                .base_url,
            "http://c/v1"
        );
        assert!(
            resolve(&endpoints, &req(Some("llama-3.3"), Some("openai")))
                .unwrap_err()
                .to_string()
                .contains("does not serve")
        );
        assert!(
            resolve(&endpoints, &req(None, Some("mistral")))
                .unwrap_err()
                .to_string()
                .contains("`groq`")
        );
    }
}
