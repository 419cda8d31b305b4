//! The admin endpoint's two walls. A browser on the operator's machine can be made to send
//! requests to a loopback port from any web page (DNS rebinding gives the page's own name a
//! loopback address), so the endpoint answers only requests whose `Host` names the listener
//! itself: `localhost`, `127.0.0.1` or `[::1]`, with the listener's port (or none). Reads
//! stay open to local monitoring; anything that changes state (every method but GET, HEAD
//! and OPTIONS) also needs `Authorization: Bearer` with `admin.token` or `API_SERVER_KEY`,
//! and so does every request under `/send`, reads included: where the operator's messages
//! go and how they fared is the operator's business only.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use crate::config::Secret;

/// The Bearer tokens that may change state; empty means nothing may.
#[derive(Clone, Default)]
pub struct AdminCredentials {
    tokens: Arc<Vec<Secret>>,
}

impl std::fmt::Debug for AdminCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AdminCredentials({} tokens)", self.tokens.len())
    }
}

impl AdminCredentials {
    /// No token: reads only.
    pub fn none() -> Self {
        Self::default()
    }

    /// `admin.token` and the API key, whichever are set.
    pub fn new(admin_token: Option<&Secret>, api_key: Option<&Secret>) -> Self {
        let tokens = admin_token
            .into_iter()
            .chain(api_key)
            .filter(|token| !token.expose().is_empty())
            .cloned()
            .collect();
        Self {
            tokens: Arc::new(tokens),
        }
    }

    fn accepts(&self, presented: &str) -> bool {
        // Every token is compared, in constant time, so timing says nothing about which.
        self.tokens.iter().fold(false, |found, token| {
            found | bool::from(presented.as_bytes().ct_eq(token.expose().as_bytes()))
        })
    }
}

/// What the guard middleware needs: the listener's port and the tokens.
#[derive(Clone, Debug)]
pub struct AdminGuard {
    port: u16,
    credentials: AdminCredentials,
}

impl AdminGuard {
    pub fn new(port: u16, credentials: AdminCredentials) -> Self {
        Self { port, credentials }
    }
}

/// Whether a request needs the token whatever its method.
fn always_needs_token(path: &str) -> bool {
    path == "/send" || path.starts_with("/send/")
}

/// Whether `host` (a `Host` header value) names this loopback listener.
pub fn is_own_host(host: &str, port: u16) -> bool {
    let (name, host_port) = match host.rsplit_once(':') {
        // `[::1]:8643` or `127.0.0.1:8643`; a bare `[::1]` has its colons inside brackets.
        Some((name, tail)) if !tail.contains(']') => (name, Some(tail)),
        _ => (host, None),
    };
    let loopback_name = name.eq_ignore_ascii_case("localhost")
        || name == "127.0.0.1"
        || name.eq_ignore_ascii_case("[::1]");
    let right_port = host_port.is_none_or(|p| p.parse::<u16>().is_ok_and(|p| p == port));
    loopback_name && right_port
}

fn refusal(status: StatusCode, message: String) -> Response {
    (status, Json(serde_json::json!({ "error": message }))).into_response()
}

/// The middleware: Host first (421), then the token for a request that changes state
/// (403 when no token is configured, 401 when the presented one is missing or wrong).
pub async fn guard(State(guard): State<AdminGuard>, request: Request, next: Next) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !is_own_host(host, guard.port) {
        tracing::warn!(
            host = %host.chars().take(100).collect::<String>(),
            path = %request.uri().path(),
            "admin API refused a request that does not name the loopback listener in Host"
        );
        return refusal(
            StatusCode::MISDIRECTED_REQUEST,
            format!(
                "the admin API answers only requests addressed to localhost:{0}, \
                 127.0.0.1:{0} or [::1]:{0}; this one named {host:?}",
                guard.port
            ),
        );
    }
    let reads = [Method::GET, Method::HEAD, Method::OPTIONS];
    if reads.contains(request.method()) && !always_needs_token(request.uri().path()) {
        return next.run(request).await;
    }
    if guard.credentials.tokens.is_empty() {
        tracing::warn!(
            method = %request.method(),
            path = %request.uri().path(),
            "admin API refused a change: no admin.token or API_SERVER_KEY is configured"
        );
        return refusal(
            StatusCode::FORBIDDEN,
            "changes and sends through the admin API are off: set admin.token (or API_SERVER_KEY) and \
             send it as `Authorization: Bearer <token>`"
                .to_owned(),
        );
    }
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .unwrap_or("");
    if presented.is_empty() || !guard.credentials.accepts(presented) {
        tracing::warn!(
            method = %request.method(),
            path = %request.uri().path(),
            "admin API refused a change with a missing or wrong token"
        );
        return refusal(
            StatusCode::UNAUTHORIZED,
            "this admin request needs the operator's token: send `Authorization: Bearer \
             <token>` with admin.token or API_SERVER_KEY"
                .to_owned(),
        );
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_names_with_the_listeners_port_are_own_hosts() {
        for host in [
            "localhost:8643",
            "LOCALHOST:8643",
            "127.0.0.1:8643",
            "[::1]:8643",
            "localhost",
            "[::1]",
        ] {
            assert!(is_own_host(host, 8643), "{host}");
        }
        for host in [
            "",
            "evil.example:8643",
            "127.0.0.1.evil.example:8643",
            "localhost:8642",
            "localhost:x",
            "10.0.0.1:8643",
            "[::2]:8643",
            "localhost.:8643",
        ] {
            assert!(!is_own_host(host, 8643), "{host}");
        }
    }

    #[test]
    fn every_send_route_needs_the_token_and_nothing_else_does() {
        for path in ["/send", "/send/", "/send/targets", "/send/abc123"] {
            assert!(always_needs_token(path), "{path}");
        }
        for path in [
            "/health",
            "/ready",
            "/metrics",
            "/log-level",
            "/sender",
            "/x/send",
        ] {
            assert!(!always_needs_token(path), "{path}");
        }
    }

    #[test]
    fn tokens_are_matched_exactly() {
        let admin = Secret::new("admin-token-0123456789");
        let api = Secret::new("api-key-0123456789abcd");
        let both = AdminCredentials::new(Some(&admin), Some(&api));
        assert!(both.accepts("admin-token-0123456789"));
        assert!(both.accepts("api-key-0123456789abcd"));
        assert!(!both.accepts("admin-token-012345678"));
        assert!(!AdminCredentials::none().accepts(""));
    }
}
