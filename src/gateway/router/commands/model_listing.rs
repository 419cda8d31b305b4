//! `/model <name>` for a name config.yaml does not configure: the lookup in the models
//! listing of the chat's current endpoint (or of the `--provider`'s endpoints) and what it
//! decides, following Hermes's `validate_requested_model`. A listed name is taken; a near
//! miss (similarity >= 0.9, a typo) is taken as the listed name, saying so; anything else is
//! refused with the closest listed names. When the listing cannot be fetched, a cloud
//! provider at its own address or an Anthropic-protocol server takes the name unverified
//! with a warning, and a custom or local server refuses it. A guest is refused before
//! anything is fetched: the fetch spends the operator's key and the provider's rate limit.

use crate::agent::provider::{Endpoint, ModelChoice, ModelClient, unverified_switch_allowed};
use crate::tools::context::Authority;

/// A listed name this similar to the one typed is taken for it (Hermes's cutoff).
const AUTO_CORRECT_CUTOFF: f32 = 0.9;
/// Listed names this similar are offered when a name is refused.
const SUGGEST_CUTOFF: f32 = 0.5;
/// How many listed names a refusal shows at most.
const SHOWN_LISTED: usize = 10;

/// What a switch goes to: the endpoint (asked for the chosen model), whether a listing
/// rather than config.yaml vouched for the model, and what the reply must add.
pub(super) struct Target {
    pub endpoint: Endpoint,
    pub listed: bool,
    pub note: Option<String>,
}

/// A name to look up, with what decides where and whether.
pub(super) struct Lookup<'a> {
    pub client: &'a ModelClient,
    pub wanted: &'a str,
    /// `--provider`: look in its endpoints' listings instead of the current endpoint's.
    pub provider: Option<&'a str>,
    /// The chat's choice, when a configured endpoint (or its listing's) still serves it.
    pub current_choice: Option<&'a ModelChoice>,
    /// The model the chat is on now (named in the warning of an unverified switch).
    pub current: &'a str,
    pub authority: Authority,
}

impl Lookup<'_> {
    /// The switch's target, or the refusal (the caller appends the configured models).
    pub(super) async fn target(&self) -> Result<Target, String> {
        if !self.authority.is_trusted() {
            return Err(guest_refusal(self.wanted));
        }
        let endpoints = self.client.endpoints();
        let candidates: Vec<&Endpoint> = match self.provider {
            Some(provider) => endpoints
                .iter()
                .filter(|e| e.provider.eq_ignore_ascii_case(provider))
                .collect(),
            None => self
                .current_choice
                .and_then(|c| endpoints.iter().find(|e| c.served_by(e)))
                .or(endpoints.first())
                .into_iter()
                .collect(),
        };
        from_listings(self.client, &candidates, self.wanted, self.current).await
    }
}

/// The target for `wanted`, a name config.yaml does not configure, from the models
/// listings of `candidates` (the module docs give the rules), or the refusal.
async fn from_listings(
    client: &ModelClient,
    candidates: &[&Endpoint],
    wanted: &str,
    current: &str,
) -> Result<Target, String> {
    let mut refusals: Vec<String> = Vec::new();
    let mut unreachable: Option<(&Endpoint, String)> = None;
    let mut failed = false;
    for &endpoint in candidates {
        let target = |model: &str, note: Option<String>| {
            let mut endpoint = endpoint.clone();
            endpoint.model = model.to_owned();
            Target {
                endpoint,
                listed: true,
                note,
            }
        };
        let provider = &endpoint.provider;
        let models = match client.listed_models(endpoint).await {
            Ok(models) => models,
            Err(error) => {
                tracing::warn!(provider = %provider, error = %error, "cannot fetch the models listing for /model");
                refusals.push(format!(
                    "`{wanted}` is not a configured model, and `{provider}`'s list of models could not be fetched to look it up ({error})."
                ));
                failed = true;
                if unverified_switch_allowed(endpoint) && unreachable.is_none() {
                    unreachable = Some((endpoint, error.to_string()));
                }
                continue;
            }
        };
        if models.iter().any(|m| m == wanted) {
            return Ok(target(wanted, None));
        }
        let names: Vec<&str> = models.iter().map(String::as_str).collect();
        if let Some(close) =
            similar::get_close_matches(wanted, &names, 1, AUTO_CORRECT_CUTOFF).first()
        {
            let note = format!(
                "`{wanted}` is not in `{provider}`'s list of models; `{close}` is, so I took that."
            );
            return Ok(target(close, Some(note)));
        }
        refusals.push(not_listed_text(wanted, provider, &names));
    }
    if let Some((endpoint, error)) = unreachable {
        let mut endpoint = endpoint.clone();
        endpoint.model = wanted.to_owned();
        let note = format!(
            "⚠️ `{}`'s list of models could not be fetched ({error}), so `{wanted}` is not verified: if the name is wrong, the next message fails (`/model {current}` switches back).",
            endpoint.provider
        );
        return Ok(Target {
            endpoint,
            listed: true,
            note: Some(note),
        });
    }
    if refusals.is_empty() {
        refusals.push(format!(
            "`{wanted}` is not a configured model, so I can't switch to it."
        ));
    } else if failed {
        refusals.push(
            "A custom or local server must list a model before `/model` switches to it, so nothing changed."
                .to_owned(),
        );
    }
    Err(refusals.join("\n"))
}

/// The refusal of a name `provider`'s listing lacks: the closest listed names, or else the
/// first few of the listing.
fn not_listed_text(wanted: &str, provider: &str, names: &[&str]) -> String {
    let mut text = format!(
        "`{wanted}` is neither configured nor in `{provider}`'s list of models, so I can't switch to it."
    );
    let close = similar::get_close_matches(wanted, names, 3, SUGGEST_CUTOFF);
    let (label, shown): (&str, Vec<&str>) = if close.is_empty() {
        let mut sorted = names.to_vec();
        sorted.sort_unstable();
        sorted.truncate(SHOWN_LISTED);
        ("Listed there", sorted)
    } else {
        ("Similar listed models", close)
    };
    if !shown.is_empty() {
        let quoted: Vec<String> = shown.iter().map(|n| format!("`{n}`")).collect();
        text.push_str(&format!("\n{label}: {}", quoted.join(", ")));
        if names.len() > shown.len() {
            text.push_str(&format!(" (of {})", names.len()));
        }
    }
    text
}

/// A guest's name outside config.yaml: refused without asking the provider.
fn guest_refusal(wanted: &str) -> String {
    format!(
        "`{wanted}` is not a configured model. Guests of this chat can switch only between the configured ones; looking a name up in the provider's list of models is for allowed users of this bot."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unlisted_name_is_refused_with_the_closest_listed_names() {
        let text = not_listed_text("gpt-4o-maxi", "openai", &["o3", "gpt-4o-mini", "gpt-4o"]);
        assert!(
            text.starts_with("`gpt-4o-maxi` is neither configured nor in `openai`'s list"),
            "{text}"
        );
        assert!(
            text.contains("Similar listed models: `gpt-4o-mini`, `gpt-4o`"),
            "{text}"
        );
        let many: Vec<String> = (0..15).map(|i| format!("m{i:02}")).collect();
        let names: Vec<&str> = many.iter().map(String::as_str).collect();
        let text = not_listed_text("zzzzzzzz-unrelated", "groq", &names);
        assert!(
            text.contains("Listed there: `m00`, `m01`") && text.contains("`m09` (of 15)"),
            "{text}"
        );
        assert!(!text.contains("`m10`"), "at most ten shown: {text}");
    }

    #[test]
    fn a_listed_choice_is_served_by_the_server_whose_listing_named_it() {
        let client = ModelClient::with_endpoints(
            Endpoint::new("openai", "http://a/v1", None, "gpt-4o"),
            vec![Endpoint::new("groq", "http://b/v1", None, "llama-3.3")],
            crate::agent::provider::HttpSettings::default(),
        )
        .unwrap();
        let listed = ModelChoice {
            model: "qwen-3".into(),
            provider: Some("groq".into()),
            listed_by: Some("http://b/v1/".into()),
        };
        let chosen = client.with_primary(&listed).unwrap();
        let primary = &chosen.endpoints()[0];
        assert_eq!(
            (primary.provider.as_str(), primary.model.as_str()),
            ("groq", "qwen-3")
        );
        assert_eq!(
            chosen.endpoints()[1].model,
            "gpt-4o",
            "the rest stay fallbacks"
        );
        // Without the listing mark, or marked by another server, nothing serves it.
        let configured = ModelChoice::configured("qwen-3", Some("groq".into()));
        assert!(client.with_primary(&configured).is_none());
        let elsewhere = ModelChoice {
            listed_by: Some("http://a/v1".into()),
            ..listed
        };
        assert!(client.with_primary(&elsewhere).is_none());
    }
}
