//! The network path checks: which proxy the daemon's connections take and what TLS trusts
//! (`network`), then, per enabled platform, whether a TLS handshake with its API host
//! succeeds through that path (`<platform>.tls`). A refused certificate is an error (the
//! platform will never connect); an unreachable host only a warning.

use std::time::Duration;

use hermes_adapter::net::{Net, NetSettings};

use super::check::Check;
use crate::config::Config;

/// What the daemon's connections will use, as one check; `None` when the settings cannot
/// be built (an unreadable CA file), which is an error naming its setting.
pub fn summary(config: &Config) -> (Check, Option<Net>) {
    match Net::new(&config.network) {
        Ok(net) => (Check::ok("network", describe(&net)), Some(net)),
        Err(e) => (
            Check::error("network", e.to_string())
                .hint("point SSL_CERT_FILE / tls.ca_certificates at readable PEM CA files"),
            None,
        ),
    }
}

fn describe(net: &Net) -> String {
    let NetSettings { proxies, ca_files } = net.settings();
    let mut parts = Vec::new();
    if proxies.is_empty() {
        parts.push("no proxy (direct connections)".to_owned());
    } else {
        for (scheme, proxy) in [
            ("https", &proxies.https),
            ("http", &proxies.http),
            ("all", &proxies.all),
        ] {
            if let Some(proxy) = proxy {
                parts.push(format!("proxy for {scheme}: {proxy}"));
            }
        }
        if !proxies.no_proxy.is_empty() {
            parts.push(format!("no proxy for: {}", proxies.no_proxy.join(",")));
        }
    }
    let roots = net.roots();
    let mut trust = format!(
        "TLS trusts {} OS and {} Mozilla root certificates",
        roots.os, roots.mozilla
    );
    if !ca_files.is_empty() {
        let files: Vec<String> = ca_files
            .iter()
            .map(|f| format!("{} ({})", f.path.display(), f.source))
            .collect();
        trust.push_str(&format!(" plus {} from {}", roots.extra, files.join(", ")));
    }
    parts.push(trust);
    parts.join("; ")
}

/// One TLS handshake with `url`'s host through the configured path.
pub async fn tls(net: &Net, platform: &str, url: &str, timeout: Duration) -> Check {
    let name = format!("{platform}.tls");
    let Ok(parsed) = reqwest::Url::parse(url) else {
        return Check::warn(name, format!("not checked: {url:?} is not a URL"));
    };
    if parsed.scheme() != "https" {
        return Check::skip(
            name,
            format!("{} is plain {}", host(&parsed), parsed.scheme()),
        );
    }
    let path = match net.proxies().for_url(&parsed) {
        Some(proxy) => format!(" through {proxy}"),
        None => String::new(),
    };
    match tokio::time::timeout(timeout, net.probe_tls(url)).await {
        Ok(Ok(())) => Check::ok(name, format!("TLS handshake with {}{path} succeeded", host(&parsed))),
        Ok(Err(why)) if why.contains("certificate") => Check::error(
            name,
            format!("TLS handshake with {}{path} failed: {why}", host(&parsed)),
        )
        .hint("if a proxy or a private CA signs this certificate, add its CA with SSL_CERT_FILE or tls.ca_certificates"),
        Ok(Err(why)) => Check::warn(
            name,
            format!("TLS handshake with {}{path} failed: {why}", host(&parsed)),
        )
        .hint("check the network path (HTTPS_PROXY, NO_PROXY, firewall)"),
        Err(_) => Check::warn(
            name,
            format!("no TLS handshake with {}{path} within {}s", host(&parsed), timeout.as_secs()),
        ),
    }
}

fn host(url: &reqwest::Url) -> String {
    format!(
        "{}:{}",
        url.host_str().unwrap_or("?"),
        url.port_or_known_default().unwrap_or(443)
    )
}
