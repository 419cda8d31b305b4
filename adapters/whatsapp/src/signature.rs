//! Meta signs every webhook delivery: `X-Hub-Signature-256: sha256=<hex>` is the HMAC-SHA256
//! of the raw body under the app secret
//! (<https://developers.facebook.com/docs/graph-api/webhooks/getting-started#event-notifications>).
//! The check runs on the bytes as received, before any parsing, and compares in constant time.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// The header value Meta would send for `body` under `secret` (tests sign with it).
pub fn sign(secret: &str, body: &[u8]) -> String {
    format!("sha256={}", hex::encode(digest(secret, body)))
}

fn digest(secret: &str, body: &[u8]) -> Vec<u8> {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes())
        .expect("HMAC takes keys of any length");
    mac.update(body);
    mac.finalize().into_bytes().to_vec()
}

/// Whether `header` is the signature of `body` under `secret`.
pub fn valid(secret: &str, body: &[u8], header: Option<&str>) -> bool {
    let Some(given) = header
        .map(str::trim)
        .and_then(|h| h.strip_prefix("sha256="))
    else {
        return false;
    };
    let Ok(given) = hex::decode(given.trim()) else {
        return false;
    };
    bool::from(digest(secret, body).ct_eq(&given))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_right_secret_over_the_exact_bytes_passes() {
        let body = br#"{"object":"whatsapp_business_account"}"#;
        let header = sign("app-secret", body);
        assert!(valid("app-secret", body, Some(&header)));
        assert!(valid(
            "app-secret",
            body,
            Some(&header.to_uppercase().replace("SHA256=", "sha256="))
        ));
        assert!(!valid("other", body, Some(&header)));
        assert!(!valid(
            "app-secret",
            b"{\"object\": \"whatsapp_business_account\"}",
            Some(&header)
        ));
        assert!(!valid(
            "app-secret",
            body,
            Some(header.trim_start_matches("sha256="))
        ));
        assert!(!valid("app-secret", body, Some("sha256=zz")));
        assert!(!valid("app-secret", body, None));
    }
}
