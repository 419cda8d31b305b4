//! Proactive rate limits (<https://discord.com/developers/docs/topics/rate-limits>) through
//! `twilight-http-ratelimiting`: a permit per route before each request — per-bucket
//! queues learned from `x-ratelimit-bucket`, and the global 50 requests/s enforced before
//! sending (interaction routes exempt, as Discord exempts them) — and the
//! `x-ratelimit-*` headers of every answer fed back with the permit. A 429 that still
//! happens on a write is classified once and handed to the core (`errors::classify`); a
//! read waits it out in `RestClient::call_raw`.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use reqwest::header::HeaderMap;
use twilight_http_ratelimiting::{Endpoint, Method, Permit, RateLimitHeaders, RateLimiter};

/// Discord's global limit for a bot is 50 requests per second; the limiter counts in 1 s
/// windows of its own, which are not Discord's, so two under it keep a burst at the start
/// of each window from meeting the previous one's inside Discord's second (latency jitter).
const GLOBAL_PER_SECOND: u16 = 48;

/// The limiter, started on first use (its actor is a task on the running runtime).
#[derive(Debug, Default)]
pub struct Limits {
    limiter: OnceLock<RateLimiter>,
}

impl Limits {
    /// Waits for the permit to send `method path`; `None` for methods Discord's limiter
    /// does not know (none the adapter uses).
    pub async fn permit(&self, method: &reqwest::Method, path: &str) -> Option<Permit> {
        let endpoint = endpoint(method, path)?;
        let limiter = self
            .limiter
            .get_or_init(|| RateLimiter::new(GLOBAL_PER_SECOND));
        Some(limiter.acquire(endpoint).await)
    }
}

/// `POST /channels/1/messages?x=y` → the limiter's endpoint (`channels/1/messages`).
fn endpoint(method: &reqwest::Method, path: &str) -> Option<Endpoint> {
    let method = match method.as_str() {
        "GET" => Method::Get,
        "POST" => Method::Post,
        "PATCH" => Method::Patch,
        "PUT" => Method::Put,
        "DELETE" => Method::Delete,
        _ => return None,
    };
    let path = path
        .split('?')
        .next()
        .unwrap_or(path)
        .trim_start_matches('/');
    Some(Endpoint {
        method,
        path: path.to_owned(),
    })
}

fn header<T: std::str::FromStr>(headers: &HeaderMap, name: &str) -> Option<T> {
    headers.get(name)?.to_str().ok()?.trim().parse().ok()
}

/// The bucket state an answer reports; `None` when it carries no bucket headers (then the
/// limiter only frees the route's queue).
pub fn bucket_headers(headers: &HeaderMap) -> Option<RateLimitHeaders> {
    let bucket = headers.get(RateLimitHeaders::BUCKET)?.as_bytes().to_vec();
    let limit: u16 = header(headers, RateLimitHeaders::LIMIT)?;
    let remaining: u16 = header(headers, RateLimitHeaders::REMAINING)?;
    let reset_after: f64 = header(headers, RateLimitHeaders::RESET_AFTER)?;
    let reset_after = Duration::try_from_secs_f64(reset_after.clamp(0.0, 3600.0)).ok()?;
    Some(RateLimitHeaders {
        bucket,
        limit,
        remaining,
        reset_at: Instant::now() + reset_after,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_drop_the_query_and_leading_slash() {
        let endpoint = endpoint(&reqwest::Method::GET, "/channels/9/messages?limit=5").unwrap();
        assert_eq!(endpoint.path, "channels/9/messages");
        assert_eq!(endpoint.method, Method::Get);
    }

    #[test]
    fn bucket_headers_need_all_four_fields() {
        let mut headers = HeaderMap::new();
        headers.insert("x-ratelimit-bucket", "abc".parse().unwrap());
        headers.insert("x-ratelimit-limit", "5".parse().unwrap());
        headers.insert("x-ratelimit-remaining", "0".parse().unwrap());
        assert!(bucket_headers(&headers).is_none());
        headers.insert("x-ratelimit-reset-after", "1.250".parse().unwrap());
        let parsed = bucket_headers(&headers).unwrap();
        assert_eq!((parsed.limit, parsed.remaining), (5, 0));
        assert_eq!(parsed.bucket, b"abc");
        assert!(parsed.reset_at > Instant::now() + Duration::from_secs(1));
    }
}
