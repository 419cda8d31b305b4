//! A fake of the four read-only endpoints `hermesd doctor` calls — Telegram `getMe`, Slack
//! `auth.test`, Discord `GET /users/@me` and an OpenAI-style `GET /models` — on one real
//! HTTP server at 127.0.0.1:0 (TCP_NODELAY), answering as the real services do when they
//! accept or refuse a credential. Every request is recorded; an unknown one gets 404.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt;
use serde_json::json;

/// How the fake answers credentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Accept,
    Reject,
}

/// One recorded request.
#[derive(Debug, Clone)]
pub struct Call {
    pub method: String,
    pub path: String,
    pub authorization: Option<String>,
}

pub struct FakePlatforms {
    pub base: String,
    calls: Arc<Mutex<Vec<Call>>>,
    _runtime: tokio::runtime::Runtime,
}

impl FakePlatforms {
    pub fn start(verdict: Verdict) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime for the fake platforms");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener.set_nonblocking(true).expect("non-blocking");
        let base = format!("http://{}", listener.local_addr().expect("address"));
        let calls = Arc::new(Mutex::new(Vec::new()));
        let recorded = Arc::clone(&calls);
        let app = Router::new().fallback(move |method: Method, uri: Uri, headers: HeaderMap| {
            let recorded = Arc::clone(&recorded);
            async move { answer(verdict, &recorded, method, uri, headers) }
        });
        runtime.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
            let listener = listener.tap_io(|stream| {
                let _ = stream.set_nodelay(true);
            });
            let _ = axum::serve(listener, app).await;
        });
        Self {
            base,
            calls,
            _runtime: runtime,
        }
    }

    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().expect("calls lock").clone()
    }
}

fn answer(
    verdict: Verdict,
    recorded: &Mutex<Vec<Call>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let path = uri.path().to_owned();
    recorded.lock().expect("calls lock").push(Call {
        method: method.to_string(),
        path: path.clone(),
        authorization: header("authorization"),
    });
    let accept = verdict == Verdict::Accept;
    let reply = |status: StatusCode, body: serde_json::Value| {
        (
            status,
            [("content-type", "application/json")],
            Body::from(body.to_string()),
        )
            .into_response()
    };
    match (method.as_str(), path.as_str()) {
        ("GET", p) if p.starts_with("/bot") && p.ends_with("/getMe") => {
            if accept {
                reply(
                    StatusCode::OK,
                    json!({"ok": true, "result": {"id": 1, "is_bot": true, "username": "doctor_bot"}}),
                )
            } else {
                reply(
                    StatusCode::UNAUTHORIZED,
                    json!({"ok": false, "error_code": 401, "description": "Unauthorized"}),
                )
            }
        }
        ("POST", "/api/auth.test") => {
            if accept {
                reply(
                    StatusCode::OK,
                    json!({"ok": true, "team": "Doctors", "user": "doctor_bot"}),
                )
            } else {
                reply(
                    StatusCode::OK,
                    json!({"ok": false, "error": "invalid_auth"}),
                )
            }
        }
        ("GET", "/api/v10/users/@me") => {
            if accept {
                reply(
                    StatusCode::OK,
                    json!({"id": "1", "username": "doctor_bot", "bot": true}),
                )
            } else {
                reply(
                    StatusCode::UNAUTHORIZED,
                    json!({"message": "401: Unauthorized", "code": 0}),
                )
            }
        }
        ("GET", "/v1/models") => {
            if accept {
                reply(
                    StatusCode::OK,
                    json!({"object": "list", "data": [{"id": "test-model"}, {"id": "other"}]}),
                )
            } else {
                reply(
                    StatusCode::UNAUTHORIZED,
                    json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}),
                )
            }
        }
        _ => reply(
            StatusCode::NOT_FOUND,
            json!({"error": "unexpected request"}),
        ),
    }
}
