//! `hermesd send`'s side of the admin API: `POST /send` (retried with the same idempotency
//! key when the connection fails, so a retry never sends twice), `GET /send/{id}` until the
//! message is settled, `GET /send/targets`. The token goes in the Authorization header only;
//! no error or output repeats it.

use std::time::Duration;

use serde_json::Value;

use crate::config::Secret;

/// How often the outcome is asked for while waiting.
const POLL_EVERY: Duration = Duration::from_millis(250);
/// Attempts of the `POST` when the daemon cannot be reached.
const POST_ATTEMPTS: u32 = 3;
/// The wait between those attempts (a daemon restarting comes back within it).
const POST_RETRY_AFTER: Duration = Duration::from_secs(1);
/// The bound of one request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a call did not get the answer it wanted.
#[derive(Debug)]
pub enum CallError {
    /// Nothing answered at the address (no daemon, or not yet).
    Unreachable(String),
    /// The daemon refused the request: the body's `error` (a usage or setup problem).
    Refused { status: u16, message: String },
    /// The daemon failed, or answered something unreadable.
    Broken(String),
}

/// The admin API of one running daemon.
pub struct AdminClient {
    http: reqwest::Client,
    base: String,
    token: Secret,
}

impl AdminClient {
    pub fn new(addr: &str, token: Secret) -> Result<Self, String> {
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .no_proxy()
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(Self {
            http,
            base: format!("http://{addr}"),
            token,
        })
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    async fn call(&self, request: reqwest::RequestBuilder) -> Result<(u16, Value), CallError> {
        let response = request
            .bearer_auth(self.token.expose())
            .send()
            .await
            .map_err(|e| {
                // reqwest's error names the URL, never the headers.
                if e.is_connect() || e.is_timeout() {
                    CallError::Unreachable(e.to_string())
                } else {
                    CallError::Broken(e.to_string())
                }
            })?;
        let status = response.status().as_u16();
        let body: Value = response
            .json()
            .await
            .map_err(|e| CallError::Broken(format!("answered {status} without JSON: {e}")))?;
        if (200..300).contains(&status) {
            return Ok((status, body));
        }
        let message = body["error"]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| body.to_string());
        if (400..500).contains(&status) {
            Err(CallError::Refused { status, message })
        } else {
            Err(CallError::Broken(format!("answered {status}: {message}")))
        }
    }

    /// `POST /send`, again with the same body while the daemon cannot be reached.
    pub async fn send(&self, body: &Value) -> Result<Value, CallError> {
        let mut attempt = 1;
        loop {
            let request = self.http.post(format!("{}/send", self.base)).json(body);
            match self.call(request).await {
                Err(CallError::Unreachable(_)) if attempt < POST_ATTEMPTS => {
                    attempt += 1;
                    tokio::time::sleep(POST_RETRY_AFTER).await;
                }
                other => return other.map(|(_, body)| body),
            }
        }
    }

    /// `GET /send/{id}`.
    pub async fn status(&self, id: &str) -> Result<Value, CallError> {
        let request = self.http.get(format!("{}/send/{id}", self.base));
        self.call(request).await.map(|(_, body)| body)
    }

    /// `GET /send/targets`.
    pub async fn targets(&self) -> Result<Value, CallError> {
        let request = self.http.get(format!("{}/send/targets", self.base));
        self.call(request).await.map(|(_, body)| body)
    }

    /// Asks for the outcome of message `id` until it is delivered, failed or abandoned, or
    /// `limit` passes (then the last state seen). A daemon that is briefly unreachable
    /// (restarting) is asked again; the message stays owed meanwhile.
    pub async fn wait_settled(&self, id: &str, limit: Duration) -> Result<Settled, CallError> {
        let deadline = tokio::time::Instant::now() + limit;
        let mut last: Option<Value> = None;
        loop {
            match self.status(id).await {
                Ok(report) if is_settled(&report) => return Ok(Settled::Done(report)),
                Ok(report) => last = Some(report),
                Err(CallError::Unreachable(_)) => {}
                Err(other) => return Err(other),
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(Settled::TimedOut(last));
            }
            tokio::time::sleep(POLL_EVERY).await;
        }
    }
}

/// How a wait ended.
#[derive(Debug)]
pub enum Settled {
    /// Delivered, failed or abandoned: the report.
    Done(Value),
    /// Still owed when the wait ended: the last report seen, if any.
    TimedOut(Option<Value>),
}

fn is_settled(report: &Value) -> bool {
    matches!(
        report["state"].as_str(),
        Some("delivered" | "failed" | "abandoned")
    )
}
