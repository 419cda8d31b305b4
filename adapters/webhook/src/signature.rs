//! Checking that a request comes from the sender a route trusts, by the scheme the sender
//! documents. The first scheme whose headers are present decides; a request with none of
//! them is refused.
//!
//! - GitHub sends the body's HMAC-SHA256 under the secret, hex-encoded after `sha256=`, in
//!   `X-Hub-Signature-256` (<https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries>).
//! - GitLab: `X-Gitlab-Token: <secret>`, compared in constant time
//!   (<https://docs.gitlab.com/user/project/integrations/webhooks/#custom-headers>).
//! - Svix (AgentMail and others): `svix-id`, `svix-timestamp`, `svix-signature: v1,<base64>`
//!   over `id.timestamp.body`, with a `whsec_` base64 key (<https://docs.svix.com/receiving/verifying-payloads/how-manual>).
//! - Generic, version 2: the sender signs `"<timestamp>.<body>"` (HMAC-SHA256, hex) into
//!   `X-Webhook-Signature-V2` and puts the Unix time in `X-Webhook-Timestamp`; accepted
//!   within five minutes of now. A request
//!   carrying the V2 header is judged by V2 alone (never downgraded to V1).
//! - Generic, version 1 (Hermes's older scheme, no replay protection): `X-Webhook-Signature:
//!   <hex HMAC-SHA256(secret, body)>`; accepted with a warning once per route.

use axum::http::HeaderMap;
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// How far a signed timestamp may be from our clock (either way).
pub const REPLAY_WINDOW_SECS: i64 = 300;

/// Why a request was not accepted as signed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("no signature header of a known scheme")]
    Missing,
    #[error("the {0} signature does not match")]
    Mismatch(&'static str),
    #[error("the {0} timestamp is missing, malformed or outside the five-minute window")]
    Stale(&'static str),
}

/// Which scheme accepted a request (the legacy one is worth a warning).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Github,
    Gitlab,
    Svix,
    GenericV2,
    GenericV1,
}

/// Checks `body` against `secret` by the scheme the headers name; `now` is Unix seconds.
pub fn verify(headers: &HeaderMap, body: &[u8], secret: &str, now: i64) -> Result<Scheme, Refusal> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|v| !v.is_empty())
    };
    if let (Some(id), Some(ts), Some(sig)) = (
        header("svix-id"),
        header("svix-timestamp"),
        header("svix-signature"),
    ) {
        return svix(id, ts, sig, body, secret, now).map(|()| Scheme::Svix);
    }
    if let Some(sig) = header("x-hub-signature-256") {
        let expected = format!("sha256={}", hex::encode(hmac(secret.as_bytes(), &[body])));
        return same(sig, &expected)
            .then_some(Scheme::Github)
            .ok_or(Refusal::Mismatch("GitHub"));
    }
    if let Some(token) = header("x-gitlab-token") {
        return same(token, secret)
            .then_some(Scheme::Gitlab)
            .ok_or(Refusal::Mismatch("GitLab"));
    }
    if let Some(sig) = header("x-webhook-signature-v2") {
        let ts = header("x-webhook-timestamp").ok_or(Refusal::Stale("X-Webhook-Timestamp"))?;
        fresh(ts, now).ok_or(Refusal::Stale("X-Webhook-Timestamp"))?;
        let expected = hex::encode(hmac(secret.as_bytes(), &[ts.as_bytes(), b".", body]));
        return same(&sig.to_ascii_lowercase(), &expected)
            .then_some(Scheme::GenericV2)
            .ok_or(Refusal::Mismatch("X-Webhook-Signature-V2"));
    }
    if let Some(sig) = header("x-webhook-signature") {
        let expected = hex::encode(hmac(secret.as_bytes(), &[body]));
        return same(&sig.to_ascii_lowercase(), &expected)
            .then_some(Scheme::GenericV1)
            .ok_or(Refusal::Mismatch("X-Webhook-Signature"));
    }
    Err(Refusal::Missing)
}

/// The `X-Hub-Signature-256` value GitHub would send for `body` (for `hermesd webhook test`
/// and tests).
pub fn github_signature(secret: &str, body: &[u8]) -> String {
    format!("sha256={}", hex::encode(hmac(secret.as_bytes(), &[body])))
}

/// The `X-Webhook-Signature-V2` value for `body` sent at Unix time `timestamp`.
pub fn generic_v2_signature(secret: &str, timestamp: i64, body: &[u8]) -> String {
    let ts = timestamp.to_string();
    hex::encode(hmac(secret.as_bytes(), &[ts.as_bytes(), b".", body]))
}

fn svix(id: &str, ts: &str, sig: &str, body: &[u8], secret: &str, now: i64) -> Result<(), Refusal> {
    fresh(ts, now).ok_or(Refusal::Stale("svix-timestamp"))?;
    let key = match secret.strip_prefix("whsec_") {
        Some(encoded) => base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_err(|_| Refusal::Mismatch("Svix"))?,
        None => secret.as_bytes().to_vec(),
    };
    let expected = base64::engine::general_purpose::STANDARD.encode(hmac(
        &key,
        &[id.as_bytes(), b".", ts.as_bytes(), b".", body],
    ));
    // Several `v1,<sig>` entries during a key rotation; any one may match.
    sig.split_whitespace()
        .filter_map(|part| part.split_once(','))
        .any(|(version, value)| version == "v1" && same(value, &expected))
        .then_some(())
        .ok_or(Refusal::Mismatch("Svix"))
}

fn fresh(ts: &str, now: i64) -> Option<()> {
    let ts: i64 = ts.parse().ok()?;
    ((now - ts).abs() <= REPLAY_WINDOW_SECS).then_some(())
}

fn hmac(key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().to_vec()
}

/// Constant-time equality of two header values (any bytes, any lengths).
fn same(given: &str, expected: &str) -> bool {
    given.len() == expected.len() && bool::from(given.as_bytes().ct_eq(expected.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().unwrap());
        }
        map
    }

    /// The test values GitHub's documentation gives for checking an implementation:
    /// <https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries#testing-the-webhook-payload-validation>
    #[test]
    fn githubs_documented_test_vector() {
        let secret = "It's a Secret to Everybody";
        let body = b"Hello, World!";
        let good = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        assert_eq!(
            verify(&headers(&[("x-hub-signature-256", good)]), body, secret, 0),
            Ok(Scheme::Github)
        );
        let bad = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e18";
        assert_eq!(
            verify(&headers(&[("x-hub-signature-256", bad)]), body, secret, 0),
            Err(Refusal::Mismatch("GitHub"))
        );
        assert!(
            verify(
                &headers(&[("x-hub-signature-256", good)]),
                b"Hello, World?",
                secret,
                0
            )
            .is_err()
        );
    }

    #[test]
    fn gitlab_token_is_the_secret_itself() {
        let h = headers(&[("x-gitlab-token", "s3cret")]);
        assert_eq!(verify(&h, b"{}", "s3cret", 0), Ok(Scheme::Gitlab));
        assert!(verify(&h, b"{}", "other", 0).is_err());
    }

    /// Svix's documented example secret, message id, timestamp, body and signature:
    /// <https://docs.svix.com/receiving/verifying-payloads/how-manual>
    #[test]
    fn svix_documented_example() {
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let id = "msg_p5jXN8AQM9LWM0D4loKWxJek";
        let ts = "1614265330";
        let body = br#"{"test": 2432232314}"#;
        let sig = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
        let h = headers(&[
            ("svix-id", id),
            ("svix-timestamp", ts),
            ("svix-signature", sig),
        ]);
        assert_eq!(verify(&h, body, secret, 1_614_265_330), Ok(Scheme::Svix));
        assert_eq!(
            verify(&h, body, secret, 1_614_265_330 + 301),
            Err(Refusal::Stale("svix-timestamp"))
        );
    }

    #[test]
    fn generic_v2_binds_the_timestamp_and_never_falls_back_to_v1() {
        let body = b"{\"a\":1}";
        let now = 1_700_000_000;
        let ts = now.to_string();
        let v2 = hex::encode(hmac(b"k", &[ts.as_bytes(), b".", body]));
        let v1 = hex::encode(hmac(b"k", &[body]));
        let ok = headers(&[
            ("x-webhook-signature-v2", &v2),
            ("x-webhook-timestamp", &ts),
        ]);
        assert_eq!(verify(&ok, body, "k", now), Ok(Scheme::GenericV2));
        assert_eq!(
            verify(&ok, body, "k", now + 301),
            Err(Refusal::Stale("X-Webhook-Timestamp"))
        );
        // A replay with the timestamp stripped but a valid V1 beside it stays refused.
        let stripped = headers(&[
            ("x-webhook-signature-v2", &v2),
            ("x-webhook-signature", &v1),
        ]);
        assert_eq!(
            verify(&stripped, body, "k", now),
            Err(Refusal::Stale("X-Webhook-Timestamp"))
        );
        let legacy = headers(&[("x-webhook-signature", &v1)]);
        assert_eq!(verify(&legacy, body, "k", now), Ok(Scheme::GenericV1));
    }

    #[test]
    fn no_known_header_is_refused() {
        assert_eq!(
            verify(&HeaderMap::new(), b"", "k", 0),
            Err(Refusal::Missing)
        );
        // A non-ASCII header value is a refusal, not a panic.
        let mut h = HeaderMap::new();
        h.insert(
            "x-hub-signature-256",
            axum::http::HeaderValue::from_bytes(b"sha256=\xff").unwrap(),
        );
        assert!(verify(&h, b"", "k", 0).is_err());
    }
}
