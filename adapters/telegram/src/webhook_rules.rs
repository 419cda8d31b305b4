//! What Telegram's `setWebhook` accepts, checked when the settings are read (`settings.rs`)
//! so a bad URL or secret is a configuration error, not a restart loop in `webhook.rs`.

/// The ports `setWebhook` accepts (https://core.telegram.org/bots/api#setwebhook: "Ports
/// currently supported for webhooks: 443, 80, 88, 8443").
pub const WEBHOOK_PORTS: [u16; 4] = [443, 80, 88, 8443];
/// `secret_token`'s length bounds (https://core.telegram.org/bots/api#setwebhook).
const SECRET_LEN: std::ops::RangeInclusive<usize> = 1..=256;

/// What `setWebhook` would refuse with a 400, found before start-up instead of in a restart
/// loop: the URL must be HTTPS on a supported port, and the secret 1–256 characters of
/// `A-Z a-z 0-9 _ -`. The messages name the settings, never the secret's value.
pub fn check_set_webhook_rules(url: &str, secret: &str) -> Vec<String> {
    let mut errors = Vec::new();
    match reqwest::Url::parse(url) {
        Ok(parsed) if parsed.scheme() != "https" => errors.push(format!(
            "telegram: webhook_url / TELEGRAM_WEBHOOK_URL must be an https:// URL (Telegram only delivers webhooks over HTTPS), not {url:?}"
        )),
        Ok(parsed) => {
            let port = parsed.port_or_known_default().unwrap_or(443);
            if !WEBHOOK_PORTS.contains(&port) {
                errors.push(format!(
                    "telegram: webhook_url / TELEGRAM_WEBHOOK_URL uses port {port}; Telegram delivers webhooks only to ports 443, 80, 88 or 8443 (put a reverse proxy in front of TELEGRAM_WEBHOOK_PORT)"
                ));
            }
        }
        Err(e) => errors.push(format!(
            "telegram: webhook_url / TELEGRAM_WEBHOOK_URL is not a URL ({e}): {url:?}"
        )),
    }
    let well_formed = SECRET_LEN.contains(&secret.chars().count())
        && secret
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !well_formed {
        errors.push(format!(
            "telegram: webhook_secret / TELEGRAM_WEBHOOK_SECRET must be 1-256 characters of A-Z, a-z, 0-9, _ and - (it has {} characters; Telegram refuses any other secret_token)",
            secret.chars().count()
        ));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::check_set_webhook_rules;

    #[test]
    fn set_webhook_rules_follow_the_bot_api() {
        let ok = "https://bot.example.com/telegram/hook";
        assert!(check_set_webhook_rules(ok, "s3cret_Hook-1").is_empty());
        assert!(check_set_webhook_rules("https://b.example:8443/h", &"a".repeat(256)).is_empty());
        let cases = [
            ("http://bot.example.com/h", "ok", "https://"),
            ("https://bot.example.com:8080/h", "ok", "port 8080"),
            (ok, "has space", "TELEGRAM_WEBHOOK_SECRET"),
            (ok, "dot.not.allowed", "TELEGRAM_WEBHOOK_SECRET"),
        ];
        for (url, secret, needle) in cases {
            let errors = check_set_webhook_rules(url, secret).join("\n");
            assert!(errors.contains(needle), "{url} {secret}: {errors}");
            assert!(
                !errors.contains(secret) || secret == "ok",
                "the secret is not echoed"
            );
        }
        let long = check_set_webhook_rules(ok, &"a".repeat(257)).join("\n");
        assert!(long.contains("257 characters"), "{long}");
    }
}
