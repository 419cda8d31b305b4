//! JSON-RPC 2.0 over signal-cli's `POST /api/v1/rpc` (signal-cli-jsonrpc(5)): one request
//! per call, `params` in camelCase as on the command line, errors typed the way the daemon
//! types them (`RATELIMIT_ERROR` is -5 and carries the send results with
//! `retryAfterSeconds`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

/// signal-cli's error code for a rate-limited command (SignalJsonRpcCommandHandler).
pub const RATE_LIMIT_ERROR: i64 = -5;
/// What a send waits before asking again when the daemon names no wait.
const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(4);

#[derive(Debug, thiserror::Error)]
pub enum RpcError {
    #[error("signal-cli rate limited the call; retry after {0:?}")]
    RateLimited(Duration),
    #[error("signal-cli answered error {code}: {message}")]
    Rpc {
        code: i64,
        message: String,
        data: Value,
    },
    /// The request never reached the daemon (connection refused).
    #[error("signal-cli is unreachable: {0}")]
    Unreachable(String),
    /// The request may have been carried out (timed out, cut off mid-answer).
    #[error("signal-cli did not answer: {0}")]
    NoAnswer(String),
    #[error("signal-cli answered HTTP {0}")]
    Http(u16),
}

#[derive(Debug)]
pub struct Rpc {
    http: reqwest::Client,
    url: String,
    next_id: AtomicU64,
}

impl Rpc {
    pub fn new(http: reqwest::Client, url: String) -> Self {
        Self {
            http,
            url,
            next_id: AtomicU64::new(1),
        }
    }

    /// Calls `method` and returns its `result`.
    pub async fn call(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let body = json!({"jsonrpc": "2.0", "method": method, "params": params, "id": id});
        let response = self
            .http
            .post(&self.url)
            .json(&body)
            .send()
            .await
            .map_err(|e| {
                let text = hermes_adapter::net::error_chain(&e);
                if e.is_connect() {
                    RpcError::Unreachable(text)
                } else {
                    RpcError::NoAnswer(text)
                }
            })?;
        let status = response.status();
        if !status.is_success() {
            return Err(RpcError::Http(status.as_u16()));
        }
        let answer: Value = response
            .json()
            .await
            .map_err(|e| RpcError::NoAnswer(hermes_adapter::net::error_chain(&e)))?;
        if let Some(error) = answer.get("error").filter(|e| !e.is_null()) {
            return Err(error_of(error));
        }
        Ok(answer.get("result").cloned().unwrap_or(Value::Null))
    }
}

fn error_of(error: &Value) -> RpcError {
    let code = error.get("code").and_then(Value::as_i64).unwrap_or(0);
    let data = error.get("data").cloned().unwrap_or(Value::Null);
    if code == RATE_LIMIT_ERROR {
        return RpcError::RateLimited(retry_after(&data).unwrap_or(DEFAULT_RETRY_AFTER));
    }
    RpcError::Rpc {
        code,
        message: error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        data,
    }
}

/// The longest `retryAfterSeconds` among the send results an error carries
/// (`data.response.results[]`).
fn retry_after(data: &Value) -> Option<Duration> {
    data.pointer("/response/results")?
        .as_array()?
        .iter()
        .filter_map(|r| r.get("retryAfterSeconds")?.as_u64())
        .max()
        .map(Duration::from_secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_limit_error_carries_its_longest_wait() {
        let error = json!({"code": -5, "message": "Failed to send message due to rate limiting",
            "data": {"response": {"timestamp": 1, "results": [
                {"type": "RATE_LIMIT_FAILURE", "retryAfterSeconds": 3},
                {"type": "RATE_LIMIT_FAILURE", "retryAfterSeconds": 9}]}}});
        assert!(
            matches!(error_of(&error), RpcError::RateLimited(d) if d == Duration::from_secs(9))
        );
        let bare = json!({"code": -5, "message": "rate limited"});
        assert!(matches!(error_of(&bare), RpcError::RateLimited(d) if d == DEFAULT_RETRY_AFTER));
        let other = json!({"code": -1, "message": "bad group"});
        assert!(matches!(error_of(&other), RpcError::Rpc { code: -1, .. }));
    }
}
