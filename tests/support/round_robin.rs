//! A tiny round-robin HTTP load balancer for the cluster tests: a real server on
//! `127.0.0.1:0` that forwards each request to the next backend in turn. A backend that
//! refuses the connection (its instance is down) is skipped, as a balancer with health
//! checks skips it; when every backend refuses, the client gets 502. The backend list is
//! updated when an instance restarts on a new port.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

struct Backends {
    /// Base URLs (`http://127.0.0.1:port`), one per instance.
    urls: Mutex<Vec<String>>,
    next: AtomicUsize,
    http: reqwest::Client,
}

/// A running balancer; dropping it stops the server.
pub struct RoundRobin {
    addr: SocketAddr,
    backends: Arc<Backends>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for RoundRobin {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl RoundRobin {
    /// Starts the balancer over `urls` (base URLs, no path).
    pub async fn start(urls: Vec<String>) -> Self {
        let backends = Arc::new(Backends {
            urls: Mutex::new(urls),
            next: AtomicUsize::new(0),
            // No pooling: a restarted instance reuses no connection of the one it replaced.
            http: reqwest::Client::builder()
                .pool_max_idle_per_host(0)
                .build()
                .expect("HTTP client"),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the balancer");
        let addr = listener.local_addr().expect("balancer address");
        let app = axum::Router::new()
            .fallback(forward)
            .with_state(backends.clone());
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("balancer serves");
        });
        Self {
            addr,
            backends,
            server,
        }
    }

    /// The balancer's base URL.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Points backend `n` at `url` (an instance restarted on a new port).
    pub fn set_backend(&self, n: usize, url: String) {
        self.backends.urls.lock().expect("backends")[n] = url;
    }
}

/// Forwards the request to the next backend that accepts the connection.
async fn forward(State(backends): State<Arc<Backends>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let Ok(body) = axum::body::to_bytes(body, usize::MAX).await else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let path = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    let urls = backends.urls.lock().expect("backends").clone();
    let first = backends.next.fetch_add(1, Ordering::Relaxed);
    for k in 0..urls.len() {
        let base = &urls[(first + k) % urls.len()];
        match send(&backends.http, &parts, base, &path, body.clone()).await {
            Ok(response) => return response,
            // Refused: the instance is down; the next one takes the request.
            Err(error) if error.is_connect() => continue,
            // The backend took the request and died before answering: the client sees
            // a failed exchange, as behind a real balancer, and may retry.
            Err(_) => return StatusCode::BAD_GATEWAY.into_response(),
        }
    }
    StatusCode::BAD_GATEWAY.into_response()
}

async fn send(
    http: &reqwest::Client,
    parts: &axum::http::request::Parts,
    base: &str,
    path: &str,
    body: Bytes,
) -> Result<Response, reqwest::Error> {
    let mut headers = HeaderMap::new();
    for (name, value) in &parts.headers {
        if name != axum::http::header::HOST && name != axum::http::header::CONTENT_LENGTH {
            headers.append(name, value.clone());
        }
    }
    let upstream = http
        .request(parts.method.clone(), format!("{base}{path}"))
        .headers(headers)
        .body(body)
        .send()
        .await?;
    let status = upstream.status();
    let headers = upstream.headers().clone();
    let bytes = upstream.bytes().await?;
    let mut response = Response::new(Body::from(bytes));
    *response.status_mut() = status;
    for (name, value) in &headers {
        if name != axum::http::header::CONTENT_LENGTH
            && name != axum::http::header::TRANSFER_ENCODING
        {
            response.headers_mut().append(name, value.clone());
        }
    }
    Ok(response)
}
