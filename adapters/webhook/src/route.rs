//! One webhook route (`platforms.webhook.extra.routes.<name>`, or an entry of the home's
//! `webhook_subscriptions.json`): which events it takes, how they are checked, the prompt
//! they become and where the answer goes. Parsed from JSON so both sources read alike.

use hermes_adapter::Secret;
use serde_json::{Map, Value};

/// The secret value that turns signature checks off for a route (local testing only; refused
/// unless the listener is on a loopback address).
pub const INSECURE_NO_AUTH: &str = "INSECURE_NO_AUTH";

/// Route keys this adapter reads. `description` and `created_at` are the subscription file's
/// bookkeeping and carry no behaviour.
const ROUTE_KEYS: &[&str] = &[
    "events",
    "secret",
    "prompt",
    "filters",
    "skills",
    "deliver",
    "deliver_extra",
    "deliver_only",
    "enabled",
    "description",
    "created_at",
];

/// Where a route's answer goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Deliver {
    /// Only the daemon's log.
    Log,
    /// A comment on the pull request or issue `deliver_extra.pr_number` of
    /// `deliver_extra.repo`.
    GithubComment,
    /// A chat on another platform this gateway runs (`deliver_extra.chat_id`, else its home
    /// channel).
    Platform(String),
}

impl Deliver {
    fn parse(text: &str) -> Self {
        match text {
            "" | "log" => Deliver::Log,
            "github_comment" => Deliver::GithubComment,
            other => Deliver::Platform(other.to_owned()),
        }
    }

    pub fn name(&self) -> &str {
        match self {
            Deliver::Log => "log",
            Deliver::GithubComment => "github_comment",
            Deliver::Platform(name) => name,
        }
    }
}

/// A validated route.
#[derive(Debug, Clone)]
pub struct Route {
    pub name: String,
    /// Accepted event types; empty accepts all.
    pub events: Vec<String>,
    /// The route's own secret, else the listener's (`extra.secret` / `WEBHOOK_SECRET`).
    pub secret: Secret,
    pub prompt: String,
    /// Declarative filters (`filters.rs`), all of which must match.
    pub filters: Vec<Value>,
    pub skills: Vec<String>,
    pub deliver: Deliver,
    /// Strings may hold `{payload.path}` templates, rendered per event.
    pub deliver_extra: Map<String, Value>,
    pub deliver_only: bool,
    pub enabled: bool,
}

impl Route {
    pub fn insecure(&self) -> bool {
        self.secret.expose() == INSECURE_NO_AUTH
    }

    /// Reads route `name` from its JSON block. `global_secret` stands in for a missing
    /// `secret`. Errors name the key (`prefix.name.key`); `warnings` collects keys read but
    /// without effect.
    pub fn parse(
        prefix: &str,
        name: &str,
        block: &Value,
        global_secret: Option<&Secret>,
        warnings: &mut Vec<String>,
    ) -> Result<Route, Vec<String>> {
        let at = |key: &str| format!("{prefix}.{name}.{key}");
        let mut errors = Vec::new();
        if !valid_name(name) {
            errors.push(format!(
                "{prefix}.{name}: a route name may hold only letters, digits, '-' and '_' (it is \
                 the last part of the URL path)"
            ));
        }
        let Some(block) = block.as_object() else {
            return Err(vec![format!("{prefix}.{name}: must be a mapping")]);
        };
        for key in block.keys() {
            if key == "script" {
                errors.push(format!(
                    "{}: route scripts are not supported by hermesd yet; use `filters` or remove \
                     the route",
                    at(key)
                ));
            } else if !ROUTE_KEYS.contains(&key.as_str()) {
                warnings.push(format!("unknown key '{}'", at(key)));
            }
        }
        let secret = match block.get("secret") {
            Some(Value::String(s)) if !s.trim().is_empty() => Some(Secret::new(s.trim())),
            Some(Value::String(_)) | None | Some(Value::Null) => global_secret.cloned(),
            Some(_) => {
                errors.push(format!("{}: must be a string", at("secret")));
                None
            }
        };
        let Some(secret) = secret else {
            errors.push(format!(
                "{}: required (or set platforms.webhook.extra.secret / WEBHOOK_SECRET); every \
                 route checks its sender's signature. For a local test without one, set it to \
                 {INSECURE_NO_AUTH} on a loopback listener.",
                at("secret")
            ));
            return Err(errors);
        };
        let events = string_list(block.get("events"), &at("events"), &mut errors);
        let skills = string_list(block.get("skills"), &at("skills"), &mut errors);
        let prompt = match block.get("prompt") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(_) => {
                errors.push(format!("{}: must be a string", at("prompt")));
                String::new()
            }
        };
        let filters = match block.get("filters") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items.clone(),
            Some(object @ Value::Object(_)) => vec![object.clone()],
            Some(_) => {
                errors.push(format!("{}: must be a list or a mapping", at("filters")));
                Vec::new()
            }
        };
        for filter in &filters {
            if let Err(e) = crate::filters::check(filter) {
                errors.push(format!("{}: {e}", at("filters")));
            }
        }
        let deliver = match block.get("deliver") {
            None | Some(Value::Null) => Deliver::Log,
            Some(Value::String(s)) => Deliver::parse(s.trim()),
            Some(_) => {
                errors.push(format!("{}: must be a string", at("deliver")));
                Deliver::Log
            }
        };
        let deliver_extra = match block.get("deliver_extra") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(map)) => map.clone(),
            Some(_) => {
                errors.push(format!("{}: must be a mapping", at("deliver_extra")));
                Map::new()
            }
        };
        let deliver_only = flag(
            block.get("deliver_only"),
            false,
            &at("deliver_only"),
            &mut errors,
        );
        let enabled = flag(block.get("enabled"), true, &at("enabled"), &mut errors);
        if deliver_only && deliver == Deliver::Log {
            errors.push(format!(
                "{}: deliver_only needs a real destination (a chat platform or github_comment), \
                 not the log",
                at("deliver")
            ));
        }
        if deliver == Deliver::GithubComment {
            for key in ["repo", "pr_number"] {
                if deliver_extra.get(key).is_none_or(Value::is_null) {
                    errors.push(format!(
                        "{}: github_comment needs deliver_extra.{key}",
                        at("deliver_extra")
                    ));
                }
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(Route {
            name: name.to_owned(),
            events,
            secret,
            prompt,
            filters,
            skills,
            deliver,
            deliver_extra,
            deliver_only,
            enabled,
        })
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

fn string_list(value: Option<&Value>, key: &str, errors: &mut Vec<String>) -> Vec<String> {
    match value {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => s
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect(),
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|item| match item {
                Value::String(s) => Some(s.trim().to_owned()),
                _ => {
                    errors.push(format!("{key}: every entry must be a string"));
                    None
                }
            })
            .collect(),
        Some(_) => {
            errors.push(format!("{key}: must be a list of strings"));
            Vec::new()
        }
    }
}

fn flag(value: Option<&Value>, default: bool, key: &str, errors: &mut Vec<String>) -> bool {
    match value {
        None | Some(Value::Null) => default,
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) if matches!(s.as_str(), "true" | "false") => s == "true",
        Some(_) => {
            errors.push(format!("{key}: must be true or false"));
            default
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(block: Value) -> Result<Route, Vec<String>> {
        Route::parse("routes", "gh", &block, None, &mut Vec::new())
    }

    #[test]
    fn a_route_needs_a_secret_of_its_own_or_the_global_one() {
        let errors = parse(json!({"prompt": "x"})).unwrap_err();
        assert!(
            errors[0].contains("routes.gh.secret: required"),
            "{errors:?}"
        );
        let global = Secret::new("g");
        let route = Route::parse("r", "gh", &json!({}), Some(&global), &mut Vec::new()).unwrap();
        assert_eq!(route.secret.expose(), "g");
    }

    #[test]
    fn deliver_only_to_the_log_and_scripts_are_refused() {
        let errors = parse(json!({"secret": "s", "deliver_only": true})).unwrap_err();
        assert!(errors[0].contains("deliver_only needs a real destination"));
        let errors = parse(json!({"secret": "s", "script": "x.py"})).unwrap_err();
        assert!(errors[0].contains("route scripts are not supported"));
    }

    #[test]
    fn github_comment_needs_repo_and_number() {
        let errors = parse(json!({"secret": "s", "deliver": "github_comment"})).unwrap_err();
        assert_eq!(errors.len(), 2, "{errors:?}");
        let route = parse(json!({"secret": "s", "deliver": "github_comment",
            "deliver_extra": {"repo": "{repository.full_name}", "pr_number": "{number}"}}))
        .unwrap();
        assert_eq!(route.deliver, Deliver::GithubComment);
    }

    #[test]
    fn names_are_url_path_segments() {
        let errors =
            Route::parse("r", "a/b", &json!({"secret": "s"}), None, &mut Vec::new()).unwrap_err();
        assert!(errors[0].contains("only letters, digits"));
    }

    #[test]
    fn events_accept_a_list_or_a_comma_separated_string() {
        let route = parse(json!({"secret": "s", "events": "push, pull_request"})).unwrap();
        assert_eq!(route.events, ["push", "pull_request"]);
    }
}
