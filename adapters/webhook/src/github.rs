//! Posting an answer as a comment on a GitHub pull request or issue, through the REST API
//! (`POST /repos/{owner}/{repo}/issues/{number}/comments`, which serves pull requests too:
//! <https://docs.github.com/en/rest/issues/comments#create-an-issue-comment>). A token from
//! `GITHUB_TOKEN` or `GH_TOKEN`; the API base from `github_api_url` / `GITHUB_API_URL`
//! (GitHub Enterprise, or a test server).
//!
//! Flow control as GitHub documents it
//! (<https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api#exceeding-the-rate-limit>):
//! a 403 or 429 with `retry-after` waits that long; with `x-ratelimit-remaining: 0` it waits
//! until `x-ratelimit-reset`; a secondary limit without either waits a minute. The ledger
//! keeps the comment owed meanwhile.

use std::sync::LazyLock;
use std::time::Duration;

use hermes_adapter::{SendErrorKind, SendResult};
use regex::Regex;
use reqwest::StatusCode;
use reqwest::header::HeaderMap;

/// GitHub's limit on a comment body, in characters.
pub const COMMENT_LIMIT: usize = 65_536;

static REPO: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[-.0-9A-Z_a-z]+/[-.0-9A-Z_a-z]+$").expect("static pattern"));

/// A pull request or issue to comment on, as the chat id `github:owner/repo#number`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Thread {
    pub repo: String,
    pub number: u64,
}

impl Thread {
    /// From rendered `deliver_extra` values; `None` unless `repo` is `owner/name` and the
    /// number a positive integer (they come from outside content).
    pub fn new(repo: &str, number: &str) -> Option<Thread> {
        let repo = repo.trim();
        let number: u64 = number.trim().parse().ok().filter(|n| *n > 0)?;
        let dots = repo.split('/').any(|part| part.chars().all(|c| c == '.'));
        (REPO.is_match(repo) && !dots).then(|| Thread {
            repo: repo.to_owned(),
            number,
        })
    }

    pub fn chat_id(&self) -> String {
        format!("github:{}#{}", self.repo, self.number)
    }

    pub fn from_chat_id(chat_id: &str) -> Option<Thread> {
        let (repo, number) = chat_id.strip_prefix("github:")?.rsplit_once('#')?;
        Thread::new(repo, number)
    }
}

/// Posts `body` on `thread`.
pub async fn comment(
    client: &reqwest::Client,
    api: &url::Url,
    token: &str,
    thread: &Thread,
    body: &str,
) -> SendResult {
    let url = format!(
        "{}/repos/{}/issues/{}/comments",
        api.as_str().trim_end_matches('/'),
        thread.repo,
        thread.number
    );
    let sent = client
        .post(url)
        .bearer_auth(token)
        .header("accept", "application/vnd.github+json")
        .header("x-github-api-version", "2022-11-28")
        .header("user-agent", "hermesd")
        .json(&serde_json::json!({ "body": body }))
        .send()
        .await;
    let response = match sent {
        Ok(response) => response,
        // The request may have reached GitHub: not blindly re-sent.
        Err(e) if e.is_timeout() => {
            return SendResult::failed(SendErrorKind::Ambiguous, "GitHub did not answer in time");
        }
        Err(e) if e.is_connect() => {
            return SendResult::failed(SendErrorKind::Transient, "cannot reach the GitHub API");
        }
        Err(_) => {
            return SendResult::failed(SendErrorKind::Ambiguous, "the GitHub request broke off");
        }
    };
    let status = response.status();
    let headers = response.headers().clone();
    if status == StatusCode::CREATED || status.is_success() {
        let id = response
            .json::<serde_json::Value>()
            .await
            .ok()
            .and_then(|v| v.get("id").map(|id| id.to_string()));
        return SendResult::sent(id);
    }
    if let Some(wait) = rate_limit_wait(status, &headers) {
        return SendResult::rate_limited(wait);
    }
    let kind = match status {
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => SendErrorKind::Forbidden,
        StatusCode::NOT_FOUND | StatusCode::GONE => SendErrorKind::NotFound,
        StatusCode::UNPROCESSABLE_ENTITY => SendErrorKind::BadFormat,
        s if s.is_server_error() => SendErrorKind::Transient,
        _ => SendErrorKind::Unknown,
    };
    SendResult::failed(kind, format!("GitHub answered {status}"))
}

/// How long GitHub asks us to wait, when the answer is flow control.
fn rate_limit_wait(status: StatusCode, headers: &HeaderMap) -> Option<Duration> {
    if status != StatusCode::FORBIDDEN && status != StatusCode::TOO_MANY_REQUESTS {
        return None;
    }
    let number =
        |name: &str| -> Option<u64> { headers.get(name)?.to_str().ok()?.trim().parse().ok() };
    if let Some(seconds) = number("retry-after") {
        return Some(Duration::from_secs(seconds.max(1)));
    }
    if number("x-ratelimit-remaining") == Some(0) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or_default();
        let reset = number("x-ratelimit-reset").unwrap_or(now + 60);
        return Some(Duration::from_secs(reset.saturating_sub(now).max(1)));
    }
    // A 429 is always flow control; a bare 403 is a permission problem.
    (status == StatusCode::TOO_MANY_REQUESTS).then(|| Duration::from_secs(60))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_come_only_from_well_formed_values() {
        let t = Thread::new("acme/web", "42").unwrap();
        assert_eq!(t.chat_id(), "github:acme/web#42");
        assert_eq!(Thread::from_chat_id("github:acme/web#42"), Some(t));
        for (repo, n) in [
            ("acme/web", "0"),
            ("acme/web", "-1"),
            ("acme/web", "4x"),
            ("acme", "1"),
            ("acme/web --body x", "1"),
            ("../x/y", "1"),
            ("../x", "1"),
            ("a/..", "1"),
            ("a/b/c", "1"),
        ] {
            assert!(Thread::new(repo, n).is_none(), "{repo} {n}");
        }
    }

    #[test]
    fn flow_control_answers() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", "7".parse().unwrap());
        assert_eq!(
            rate_limit_wait(StatusCode::FORBIDDEN, &h),
            Some(Duration::from_secs(7))
        );
        let h = HeaderMap::new();
        assert_eq!(rate_limit_wait(StatusCode::FORBIDDEN, &h), None);
        assert_eq!(
            rate_limit_wait(StatusCode::TOO_MANY_REQUESTS, &h),
            Some(Duration::from_secs(60))
        );
        let mut h = HeaderMap::new();
        h.insert("x-ratelimit-remaining", "0".parse().unwrap());
        h.insert("x-ratelimit-reset", "1".parse().unwrap());
        assert_eq!(
            rate_limit_wait(StatusCode::FORBIDDEN, &h),
            Some(Duration::from_secs(1))
        );
    }
}
