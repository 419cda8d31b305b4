//! Rate limits as Discord applies them (<https://discord.com/developers/docs/topics/rate-limits>):
//! every answer of a limited route carries the bucket headers (`x-ratelimit-limit`,
//! `-remaining`, `-reset`, `-reset-after`, `-bucket`); a bucket is per route *and* major
//! parameter (channel, guild, webhook); a request over a bucket, or over the global 50
//! requests per second (interaction routes exempt), gets 429 with `retry_after`, `global`
//! and `x-ratelimit-scope`. Responses 401, 403 and 429 (except `shared`-scope 429s) count
//! toward the invalid-request limit (10,000 per 10 minutes, then a temporary IP ban),
//! which the fake counts in [`Limits::invalid_requests`]. The per-route numbers are the
//! fake's own (Discord says not to hard-code them; clients must read the headers).

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// Discord's global limit per bot.
const GLOBAL_PER_SECOND: u32 = 50;

/// A route's bucket: its name (hashed into `x-ratelimit-bucket`) and its window.
#[derive(Debug, Clone, Copy)]
struct RouteLimit {
    bucket: &'static str,
    limit: u32,
    period: Duration,
}

const fn per(bucket: &'static str, limit: u32, millis: u64) -> RouteLimit {
    RouteLimit {
        bucket,
        limit,
        period: Duration::from_millis(millis),
    }
}

/// The bucket of a request (`segments` of the path after `/api/v10/`) and its major
/// parameter; `None` for unlimited routes (gateway lookup, attachments).
fn route_limit(method: &str, segments: &[&str]) -> Option<(RouteLimit, String)> {
    let limit = match (method, segments) {
        ("POST", ["channels", _, "messages"]) => per("create-message", 5, 5_000),
        ("PATCH", ["channels", _, "messages", _]) => per("edit-message", 5, 5_000),
        ("DELETE", ["channels", _, "messages", _]) => per("delete-message", 5, 1_000),
        ("POST", ["channels", _, "typing"]) => per("typing", 5, 5_000),
        ("GET", ["channels", _, "messages"]) => per("get-messages", 5, 1_000),
        ("POST", ["channels", _, "messages", _, "threads"]) => per("start-thread", 5, 5_000),
        ("GET", ["gateway", ..]) => return None,
        (_, ["interactions", ..]) => return None,
        _ => per("other", 10, 1_000),
    };
    let major = match segments {
        ["channels", id, ..] | ["guilds", id, ..] => (*id).to_owned(),
        ["webhooks", id, token, ..] => format!("{id}/{token}"),
        _ => String::new(),
    };
    Some((limit, major))
}

#[derive(Debug, Clone, Copy)]
struct Window {
    remaining: u32,
    reset_at: Instant,
}

impl Window {
    /// Takes one request from the window (a new window when the last one ended); `Err`
    /// with the wait when it is used up.
    fn take(&mut self, limit: u32, period: Duration, now: Instant) -> Result<(), Duration> {
        if now >= self.reset_at {
            *self = Window {
                remaining: limit,
                reset_at: now + period,
            };
        }
        if self.remaining == 0 {
            return Err(self.reset_at - now);
        }
        self.remaining -= 1;
        Ok(())
    }
}

/// The global limit as a token bucket: 50 requests' worth, refilled at 50 per second
/// (any burst beyond what the last second paid for is refused).
#[derive(Debug, Clone, Copy)]
struct Global {
    tokens: f64,
    at: Instant,
}

impl Global {
    fn take(&mut self, now: Instant) -> Result<(), Duration> {
        let rate = f64::from(GLOBAL_PER_SECOND);
        let refill = now.saturating_duration_since(self.at).as_secs_f64() * rate;
        self.tokens = (self.tokens + refill).min(rate);
        self.at = now;
        if self.tokens < 1.0 {
            return Err(Duration::from_secs_f64((1.0 - self.tokens) / rate));
        }
        self.tokens -= 1.0;
        Ok(())
    }
}

/// The fake's rate-limit state.
#[derive(Debug)]
pub struct Limits {
    pub enabled: bool,
    global: Global,
    buckets: HashMap<(&'static str, String), Window>,
    /// 401, 403 and non-shared 429 answers so far.
    pub invalid_requests: u32,
    /// 429s the limits produced (injected faults not included).
    pub rate_limited: u32,
}

impl Default for Limits {
    fn default() -> Self {
        let now = Instant::now();
        Self {
            enabled: true,
            global: Global {
                tokens: f64::from(GLOBAL_PER_SECOND),
                at: now,
            },
            buckets: HashMap::new(),
            invalid_requests: 0,
            rate_limited: 0,
        }
    }
}

/// What a limited request was told, to be put on its answer.
#[derive(Debug, Clone)]
pub struct BucketState {
    bucket: &'static str,
    limit: u32,
    remaining: u32,
    reset_after: Duration,
}

fn bucket_hash(name: &str) -> String {
    // A stable opaque id, as Discord's are.
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    format!("{hash:016x}")
}

impl BucketState {
    pub fn apply(&self, headers: &mut HeaderMap) {
        let reset_at = SystemTime::now() + self.reset_after;
        let reset_epoch = reset_at
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64();
        let pairs = [
            ("x-ratelimit-limit", self.limit.to_string()),
            ("x-ratelimit-remaining", self.remaining.to_string()),
            ("x-ratelimit-reset", format!("{reset_epoch:.3}")),
            (
                "x-ratelimit-reset-after",
                format!("{:.3}", self.reset_after.as_secs_f64()),
            ),
            ("x-ratelimit-bucket", bucket_hash(self.bucket)),
        ];
        for (name, value) in pairs {
            if let Ok(value) = HeaderValue::from_str(&value) {
                headers.insert(name, value);
            }
        }
    }
}

/// A 429 as Discord sends it.
fn too_many(retry_after: Duration, global: bool, state: Option<&BucketState>) -> Response {
    let seconds = retry_after.as_secs_f64().max(0.001);
    let body =
        json!({"message": "You are being rate limited.", "retry_after": seconds, "global": global});
    let mut response = (StatusCode::TOO_MANY_REQUESTS, axum::Json(body)).into_response();
    let headers = response.headers_mut();
    if let Some(state) = state {
        state.apply(headers);
    }
    if let Ok(value) = HeaderValue::from_str(&(seconds.ceil() as u64).to_string()) {
        headers.insert("retry-after", value);
    }
    let scope = if global { "global" } else { "user" };
    headers.insert("x-ratelimit-scope", HeaderValue::from_static(scope));
    if global {
        headers.insert("x-ratelimit-global", HeaderValue::from_static("true"));
    }
    response
}

impl Limits {
    /// Admits a request or answers it with a 429; `Ok(Some(..))` carries the headers for
    /// the answer of a limited route.
    pub fn admit(
        &mut self,
        method: &str,
        segments: &[&str],
    ) -> Result<Option<BucketState>, Box<Response>> {
        if !self.enabled {
            return Ok(None);
        }
        let Some((route, major)) = route_limit(method, segments) else {
            return Ok(None);
        };
        let now = Instant::now();
        if let Err(wait) = self.global.take(now) {
            self.rate_limited += 1;
            return Err(Box::new(too_many(wait, true, None)));
        }
        let window = self.buckets.entry((route.bucket, major)).or_insert(Window {
            remaining: 0,
            reset_at: now,
        });
        let taken = window.take(route.limit, route.period, now);
        let state = BucketState {
            bucket: route.bucket,
            limit: route.limit,
            remaining: window.remaining,
            reset_after: window.reset_at.saturating_duration_since(now),
        };
        match taken {
            Ok(()) => Ok(Some(state)),
            Err(wait) => {
                self.rate_limited += 1;
                Err(Box::new(too_many(wait, false, Some(&state))))
            }
        }
    }

    /// Counts an answer toward the invalid-request limit when Discord would.
    pub fn record_answer(&mut self, status: u16, shared_scope: bool) {
        if status == 401 || status == 403 || (status == 429 && !shared_scope) {
            self.invalid_requests += 1;
        }
    }
}
