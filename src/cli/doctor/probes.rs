//! Whether the platforms accept their tokens and the model endpoint answers: one cheap,
//! read-only request each (`getMe`, `auth.test`, `GET /users/@me`, `GET /models`). Failing to
//! connect is a warning (the network may be down, the service is not necessarily wrong); an
//! explicit refusal of the credential is an error.

use std::time::Duration;

use reqwest::{Client, RequestBuilder, StatusCode};
use serde_json::Value;

use super::check::Check;
use crate::agent::provider::{ApiMode, Endpoint};

pub const DEFAULT_TELEGRAM_BASE: &str = "https://api.telegram.org/bot";
pub const DEFAULT_SLACK_BASE: &str = "https://slack.com/api";
pub const DEFAULT_DISCORD_BASE: &str = "https://discord.com/api/v10";

/// What one probe learned.
#[derive(Debug)]
enum Outcome {
    Accepted(String),
    Rejected(String),
    Unreachable(String),
    Unexpected(String),
}

/// A probe's request, run with the shared client.
async fn send(request: RequestBuilder) -> Result<(StatusCode, Value), Outcome> {
    let response = request
        .send()
        .await
        .map_err(|e| Outcome::Unreachable(describe(e)))?;
    let status = response.status();
    let body = response.bytes().await.unwrap_or_default();
    let json = serde_json::from_slice(&body).unwrap_or(Value::Null);
    Ok((status, json))
}

/// The error and its causes ("tcp connect error: Connection refused"), never the URL: a
/// Telegram URL carries the token.
fn describe(error: reqwest::Error) -> String {
    hermes_adapter::net::error_chain(&error.without_url())
}

fn http_error(status: StatusCode) -> Outcome {
    if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
        Outcome::Rejected(format!("answered {status}"))
    } else {
        Outcome::Unexpected(format!("answered {status}"))
    }
}

/// The client every probe uses: the daemon's proxies and TLS trust, short timeouts, no
/// redirects (a redirect would carry the credential to another host).
pub fn client(net: &hermes_adapter::net::Net, timeout: Duration) -> reqwest::Result<Client> {
    net.http_client()
        .timeout(timeout)
        .connect_timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("hermesd-doctor/", env!("CARGO_PKG_VERSION")))
        .build()
}

/// A method URL the way the adapter reads `base_url` (python-telegram-bot's convention: a
/// `.../bot` prefix or a `{token}` placeholder; a bare server root gets `/bot` added).
pub fn telegram_url(base: &str, token: &str, method: &str) -> String {
    hermes_telegram::Endpoints::resolve(Some(base.trim()), None)
        .unwrap_or_default()
        .method_url(token, method)
}

pub async fn telegram(client: &Client, base: &str, token: &str) -> Check {
    let outcome = match send(client.get(telegram_url(base, token, "getMe"))).await {
        Err(outcome) => outcome,
        Ok((status, body)) if status.is_success() && body["ok"] == Value::Bool(true) => {
            let name = body["result"]["username"].as_str().unwrap_or("?");
            Outcome::Accepted(format!("getMe accepted the token (bot @{name})"))
        }
        // Telegram answers 401 for a wrong token and 404 for one it cannot parse.
        Ok((StatusCode::NOT_FOUND, _)) => Outcome::Rejected("getMe answered 404 Not Found".into()),
        Ok((status, _)) => prefix(http_error(status), "getMe"),
    };
    verdict(
        "telegram.token",
        outcome,
        "check TELEGRAM_BOT_TOKEN against @BotFather (/token)",
    )
}

pub async fn slack(client: &Client, base: &str, token: &str) -> Check {
    let url = format!("{}/auth.test", base.trim().trim_end_matches('/'));
    let outcome = match send(client.post(url).bearer_auth(token)).await {
        Err(outcome) => outcome,
        Ok((status, body)) if status.is_success() => match body["ok"].as_bool() {
            Some(true) => Outcome::Accepted(format!(
                "auth.test accepted the token (team {}, user {})",
                body["team"].as_str().unwrap_or("?"),
                body["user"].as_str().unwrap_or("?")
            )),
            _ => {
                let error = body["error"].as_str().unwrap_or("unknown_error");
                let refused = [
                    "invalid_auth",
                    "not_authed",
                    "account_inactive",
                    "token_revoked",
                    "token_expired",
                    "not_allowed_token_type",
                ];
                if refused.contains(&error) {
                    Outcome::Rejected(format!("auth.test answered {error}"))
                } else {
                    Outcome::Unexpected(format!("auth.test answered {error}"))
                }
            }
        },
        Ok((status, _)) => prefix(http_error(status), "auth.test"),
    };
    verdict(
        "slack.token",
        outcome,
        "check SLACK_BOT_TOKEN (OAuth & Permissions → Bot User OAuth Token)",
    )
}

/// signal-cli's `GET /api/v1/check`, which answers 200 while the daemon runs
/// (signal-cli-jsonrpc(5)); the daemon takes no credential.
pub async fn signal(client: &Client, base: &str) -> Check {
    let url = format!("{}/api/v1/check", base.trim_end_matches('/'));
    let outcome = match send(client.get(url)).await {
        Err(outcome) => outcome,
        Ok((status, _)) if status.is_success() => {
            Outcome::Accepted("signal-cli's daemon answers /api/v1/check".to_owned())
        }
        Ok((status, _)) => prefix(http_error(status), "/api/v1/check"),
    };
    verdict(
        "signal.http_url",
        outcome,
        "start `signal-cli -a NUMBER daemon --http HOST:PORT --receive-mode=on-connection` and point SIGNAL_HTTP_URL at it",
    )
}

pub async fn discord(client: &Client, base: &str, token: &str) -> Check {
    let url = format!("{}/users/@me", base.trim().trim_end_matches('/'));
    let request = client
        .get(url)
        .header("Authorization", format!("Bot {token}"));
    let outcome = match send(request).await {
        Err(outcome) => outcome,
        Ok((status, body)) if status.is_success() => Outcome::Accepted(format!(
            "/users/@me accepted the token (bot {})",
            body["username"].as_str().unwrap_or("?")
        )),
        Ok((status, _)) => prefix(http_error(status), "/users/@me"),
    };
    verdict(
        "discord.token",
        outcome,
        "check DISCORD_BOT_TOKEN (Developer Portal → Bot → Reset Token)",
    )
}

/// `GET {base}/models` with the key the agent would send.
pub async fn model(client: &Client, endpoint: &Endpoint) -> Check {
    let base = endpoint.base_url.trim().trim_end_matches('/');
    let (url, request) = match endpoint.mode {
        ApiMode::AnthropicMessages => {
            let url = if base.ends_with("/v1") {
                format!("{base}/models")
            } else {
                format!("{base}/v1/models")
            };
            let mut request = client.get(&url).header("anthropic-version", "2023-06-01");
            if let Some(key) = &endpoint.api_key {
                request = request.header("x-api-key", key.expose());
            }
            (url, request)
        }
        _ => {
            let url = format!("{base}/models");
            let mut request = client.get(&url);
            if let Some(key) = &endpoint.api_key {
                request = request.bearer_auth(key.expose());
            }
            (url, request)
        }
    };
    let outcome = match send(request).await {
        Err(outcome) => outcome,
        Ok((status, body)) if status.is_success() => {
            let count = body["data"].as_array().map(Vec::len);
            Outcome::Accepted(match count {
                Some(count) => format!("{url} answered ({count} models)"),
                None => format!("{url} answered"),
            })
        }
        Ok((status, _)) => prefix(http_error(status), &url),
    };
    let name = format!("model.{}", endpoint.provider);
    verdict(
        &name,
        outcome,
        "check the provider's API key (providers.<name>.api_key or its *_API_KEY variable)",
    )
}

fn prefix(outcome: Outcome, what: &str) -> Outcome {
    match outcome {
        Outcome::Rejected(text) => Outcome::Rejected(format!("{what} {text}")),
        Outcome::Unexpected(text) => Outcome::Unexpected(format!("{what} {text}")),
        other => other,
    }
}

fn verdict(name: &str, outcome: Outcome, fix: &str) -> Check {
    match outcome {
        Outcome::Accepted(text) => Check::ok(name, text),
        Outcome::Rejected(text) => Check::error(name, format!("rejected: {text}")).hint(fix),
        Outcome::Unreachable(text) => Check::warn(name, format!("unreachable: {text}"))
            .hint("check the network, DNS and proxy settings (or run with --offline)"),
        Outcome::Unexpected(text) => Check::warn(name, format!("unexpected answer: {text}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn telegram_urls_follow_python_telegram_bot() {
        let token = "1:T";
        assert_eq!(
            telegram_url(DEFAULT_TELEGRAM_BASE, token, "getMe"),
            "https://api.telegram.org/bot1:T/getMe"
        );
        assert_eq!(
            telegram_url("http://h:81/", token, "getMe"),
            "http://h:81/bot1:T/getMe"
        );
        assert_eq!(
            telegram_url("http://h/custom/{token}/", token, "getMe"),
            "http://h/custom/1:T/getMe"
        );
    }
}
