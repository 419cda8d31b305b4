//! A fake GitHub REST API for the one call hermesd makes: creating a comment on an issue or
//! pull request, `POST /repos/{owner}/{repo}/issues/{issue_number}/comments`
//! (https://docs.github.com/en/rest/issues/comments#create-an-issue-comment; pull requests
//! are issues for comments: "Every pull request is an issue, but not every issue is a pull
//! request", same page). It records each comment for assertions.
//!
//! What it enforces, each from GitHub's documentation:
//! - a token in `Authorization: Bearer <token>` (or `token <token>`), else 401
//!   (https://docs.github.com/en/rest/authentication/authenticating-to-the-rest-api);
//! - a `User-Agent` header, else 403 ("Requests with no User-Agent header will be rejected",
//!   https://docs.github.com/en/rest/using-the-rest-api/getting-started-with-the-rest-api#user-agent);
//! - a JSON body with a string `body`, else 422 (the endpoint's "Validation failed" answer);
//! - success is `201 Created` with the comment (`id`, `body`, `html_url`);
//! - flow control as documented for rate limits
//!   (https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api#exceeding-the-rate-limit):
//!   a test can make the next answers `403` with `retry-after`, or `429` with
//!   `x-ratelimit-remaining: 0` and `x-ratelimit-reset`.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

pub const TOKEN: &str = "ghp_fake_token_0123456789abcdefABCDEF";

/// One created comment.
#[derive(Debug, Clone)]
pub struct Comment {
    pub repo: String,
    pub number: u64,
    pub body: String,
}

/// A scripted refusal for the next request.
#[derive(Debug, Clone, Copy)]
pub enum Fault {
    /// 403 with `retry-after: <secs>` (a secondary rate limit).
    RetryAfter(u64),
    /// 429 with `x-ratelimit-remaining: 0` and a reset `secs` from now.
    Exhausted(u64),
    /// 502 (GitHub's edge failing).
    BadGateway,
}

#[derive(Debug)]
struct Shared {
    comments: Vec<Comment>,
    /// The number of comments, for waiters.
    posted: tokio::sync::watch::Sender<usize>,
    faults: VecDeque<Fault>,
    /// Every request, refused ones included.
    requests: usize,
}

#[derive(Debug)]
pub struct FakeGithub {
    addr: SocketAddr,
    shared: Arc<Mutex<Shared>>,
    task: tokio::task::AbortHandle,
}

impl Drop for FakeGithub {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeGithub {
    pub async fn start() -> FakeGithub {
        let shared = Arc::new(Mutex::new(Shared {
            comments: Vec::new(),
            posted: tokio::sync::watch::channel(0).0,
            faults: VecDeque::new(),
            requests: 0,
        }));
        let app = Router::new()
            .route(
                "/repos/{owner}/{repo}/issues/{number}/comments",
                post(create),
            )
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        })
        .abort_handle();
        FakeGithub { addr, shared, task }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn comments(&self) -> Vec<Comment> {
        self.shared.lock().unwrap().comments.clone()
    }

    /// The text of comment `id` (as its `id` came back from the create call).
    pub fn comment_text(&self, id: &str) -> Option<String> {
        let index: usize = id.parse().ok()?;
        let shared = self.shared.lock().unwrap();
        shared
            .comments
            .get(index.checked_sub(1)?)
            .map(|c| c.body.clone())
    }

    /// Watches the number of comments posted so far.
    pub fn watch_comments(&self) -> tokio::sync::watch::Receiver<usize> {
        self.shared.lock().unwrap().posted.subscribe()
    }

    pub fn requests(&self) -> usize {
        self.shared.lock().unwrap().requests
    }

    pub fn fail_next(&self, fault: Fault) {
        self.shared.lock().unwrap().faults.push_back(fault);
    }
}

async fn create(
    State(shared): State<Arc<Mutex<Shared>>>,
    Path((owner, repo, number)): Path<(String, String, u64)>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let mut shared = shared.lock().unwrap();
    shared.requests += 1;
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let token = auth
        .strip_prefix("Bearer ")
        .or_else(|| auth.strip_prefix("token "));
    if token != Some(TOKEN) {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"message": "Bad credentials"})),
        )
            .into_response();
    }
    if !headers.contains_key("user-agent") {
        return (
            StatusCode::FORBIDDEN,
            Json(json!({"message": "Request forbidden by administrative rules. Please make sure your request has a User-Agent header"})),
        )
            .into_response();
    }
    if let Some(fault) = shared.faults.pop_front() {
        return match fault {
            Fault::RetryAfter(secs) => (
                StatusCode::FORBIDDEN,
                [("retry-after", secs.to_string())],
                Json(json!({"message": "You have exceeded a secondary rate limit."})),
            )
                .into_response(),
            Fault::Exhausted(secs) => {
                let reset = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_secs()
                    + secs;
                (
                    StatusCode::TOO_MANY_REQUESTS,
                    [
                        ("x-ratelimit-remaining", "0".to_owned()),
                        ("x-ratelimit-reset", reset.to_string()),
                    ],
                    Json(json!({"message": "API rate limit exceeded"})),
                )
                    .into_response()
            }
            Fault::BadGateway => StatusCode::BAD_GATEWAY.into_response(),
        };
    }
    let text = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v.get("body").and_then(Value::as_str).map(str::to_owned));
    let Some(text) = text else {
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(json!({"message": "Validation Failed"})),
        )
            .into_response();
    };
    let id = shared.comments.len() as u64 + 1;
    shared.comments.push(Comment {
        repo: format!("{owner}/{repo}"),
        number,
        body: text.clone(),
    });
    let count = shared.comments.len();
    shared.posted.send_replace(count);
    (
        StatusCode::CREATED,
        Json(json!({"id": id, "body": text,
            "html_url": format!("https://github.com/{owner}/{repo}/pull/{number}#issuecomment-{id}")})),
    )
        .into_response()
}
