//! The SSRF guard for every URL the model chooses (Hermes's `tools/url_safety.py` rule, in
//! our code): such a URL may not reach a private, loopback, link-local, reserved, multicast,
//! unspecified or carrier-grade-NAT address unless the operator allows private URLs, and
//! never a cloud metadata endpoint (all of 169.254.0.0/16, 100.100.100.200, fd00:ec2::254,
//! `metadata.google.internal`, `metadata.goog`), allowed or not.
//!
//! Three places are checked, because each alone has a hole:
//! - the URL's host before anything is sent (hyper never asks a resolver about an IP
//!   literal; the WHATWG parser has already turned `2130706433` or `0x7f.1` into `127.0.0.1`);
//! - the resolver the client connects through: every address a name resolves to is judged
//!   and the connection uses exactly those addresses, so a second, rebinding lookup cannot
//!   slip in; one bad address refuses the whole name; a failed lookup is a refusal;
//! - each redirect hop, with the same host rule (its name then goes through the resolver).
//!
//! Guarded clients never use a proxy: a proxy would resolve the name itself, out of sight.
//! The resolver's lookup is a trait so tests can map a public-looking name to 127.0.0.1.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// What the model reads when a target is refused (Hermes's wording is not copied).
pub const BLOCKED: &str = "Blocked: this URL points into a private or internal network";

/// Hosts that are cloud metadata services whatever they resolve to.
const METADATA_HOSTS: &[&str] = &["metadata.google.internal", "metadata.goog"];

/// Redirect hops a guarded fetch follows.
pub const MAX_REDIRECTS: usize = 5;

/// Why a target was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    pub reason: String,
}

impl fmt::Display for Blocked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{BLOCKED} ({})", self.reason)
    }
}

impl std::error::Error for Blocked {}

fn blocked(reason: impl Into<String>) -> Blocked {
    Blocked {
        reason: reason.into(),
    }
}

fn in_v4(ip: Ipv4Addr, net: [u8; 4], prefix: u32) -> bool {
    let mask = if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - prefix)
    };
    u32::from(ip) & mask == u32::from(Ipv4Addr::from(net)) & mask
}

fn in_v6(ip: Ipv6Addr, net: Ipv6Addr, prefix: u32) -> bool {
    let mask = if prefix == 0 {
        0
    } else {
        u128::MAX << (128 - prefix)
    };
    u128::from(ip) & mask == u128::from(net) & mask
}

/// IPv4 ranges that are not the public internet: this network, RFC 1918, CGNAT, loopback,
/// link-local, IETF protocol assignments, documentation, benchmarking, multicast, reserved
/// and broadcast.
const V4_NOT_PUBLIC: &[([u8; 4], u32)] = &[
    ([0, 0, 0, 0], 8),
    ([10, 0, 0, 0], 8),
    ([100, 64, 0, 0], 10),
    ([127, 0, 0, 0], 8),
    ([169, 254, 0, 0], 16),
    ([172, 16, 0, 0], 12),
    ([192, 0, 0, 0], 24),
    ([192, 0, 2, 0], 24),
    ([192, 168, 0, 0], 16),
    ([198, 18, 0, 0], 15),
    ([198, 51, 100, 0], 24),
    ([203, 0, 113, 0], 24),
    ([224, 0, 0, 0], 4),
    ([240, 0, 0, 0], 4),
];

/// The IPv4 address an IPv6 address carries (mapped `::ffff:a.b.c.d`, 6to4 `2002:ab:cd::`),
/// judged as that IPv4 address.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some(v4);
    }
    let s = ip.segments();
    (s[0] == 0x2002)
        .then(|| Ipv4Addr::new((s[1] >> 8) as u8, s[1] as u8, (s[2] >> 8) as u8, s[2] as u8))
}

/// Whether `ip` is outside the public internet (blocked unless private URLs are allowed).
pub fn is_not_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => V4_NOT_PUBLIC
            .iter()
            .any(|(net, prefix)| in_v4(v4, *net, *prefix)),
        IpAddr::V6(v6) => {
            if let Some(v4) = embedded_v4(v6) {
                return is_not_public(IpAddr::V4(v4));
            }
            // Only global unicast (2000::/3) is public; inside it, the IETF protocol block
            // (Teredo and friends) and the documentation prefix are not.
            !in_v6(v6, Ipv6Addr::new(0x2000, 0, 0, 0, 0, 0, 0, 0), 3)
                || in_v6(v6, Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, 0), 23)
                || in_v6(v6, Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0), 32)
        }
    }
}

/// Whether `ip` is a cloud metadata endpoint (refused even when private URLs are allowed).
pub fn is_metadata(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            in_v4(v4, [169, 254, 0, 0], 16) || v4 == Ipv4Addr::new(100, 100, 100, 200)
        }
        IpAddr::V6(v6) => {
            v6 == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)
                || embedded_v4(v6).is_some_and(|v4| is_metadata(IpAddr::V4(v4)))
        }
    }
}

/// The rule for one address.
pub fn check_ip(ip: IpAddr, allow_private: bool) -> Result<(), Blocked> {
    if is_metadata(ip) {
        return Err(blocked(format!("{ip} is a cloud metadata address")));
    }
    if !allow_private && is_not_public(ip) {
        return Err(blocked(format!("{ip} is not a public address")));
    }
    Ok(())
}

/// The rule for a URL before any request: http(s) only; an IP-literal host is judged here
/// (no resolver will see it); metadata host names are refused by name.
pub fn check_url(url: &reqwest::Url, allow_private: bool) -> Result<(), Blocked> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(blocked(format!(
            "scheme {} is not http or https",
            url.scheme()
        )));
    }
    let host = url
        .host_str()
        .ok_or_else(|| blocked("the URL has no host"))?;
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return check_ip(ip, allow_private);
    }
    let name = host.trim_end_matches('.').to_ascii_lowercase();
    if METADATA_HOSTS.contains(&name.as_str()) {
        return Err(blocked(format!("{name} is a cloud metadata host")));
    }
    Ok(())
}

/// Parses a model-given URL and applies [`check_url`].
pub fn parse_checked(raw: &str, allow_private: bool) -> Result<reqwest::Url, Blocked> {
    let url =
        reqwest::Url::parse(raw.trim()).map_err(|e| blocked(format!("not a valid URL: {e}")))?;
    check_url(&url, allow_private)?;
    Ok(url)
}

/// How names become addresses; the system resolver in production, a table in tests.
pub trait Lookup: Send + Sync {
    fn lookup(&self, host: String) -> BoxFuture<'static, std::io::Result<Vec<IpAddr>>>;
}

/// The system resolver (`getaddrinfo` through tokio).
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemLookup;

impl Lookup for SystemLookup {
    fn lookup(&self, host: String) -> BoxFuture<'static, std::io::Result<Vec<IpAddr>>> {
        Box::pin(async move {
            let addrs = tokio::net::lookup_host((host.as_str(), 0)).await?;
            Ok(addrs.map(|a| a.ip()).collect())
        })
    }
}

/// The resolver a guarded client connects through.
#[derive(Clone)]
pub struct GuardedResolver {
    lookup: Arc<dyn Lookup>,
    allow_private: bool,
}

impl fmt::Debug for GuardedResolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GuardedResolver")
            .field("allow_private", &self.allow_private)
            .finish_non_exhaustive()
    }
}

impl GuardedResolver {
    pub fn new(lookup: Arc<dyn Lookup>, allow_private: bool) -> Self {
        Self {
            lookup,
            allow_private,
        }
    }

    /// The checked addresses of `host`, or why it is refused.
    pub async fn resolve_checked(&self, host: &str) -> Result<Vec<IpAddr>, Blocked> {
        let name = host.trim_end_matches('.').to_ascii_lowercase();
        if METADATA_HOSTS.contains(&name.as_str()) {
            return Err(blocked(format!("{name} is a cloud metadata host")));
        }
        let addrs = self
            .lookup
            .lookup(name.clone())
            .await
            .map_err(|e| blocked(format!("{name} could not be resolved ({e})")))?;
        if addrs.is_empty() {
            return Err(blocked(format!("{name} has no address")));
        }
        for ip in &addrs {
            check_ip(*ip, self.allow_private)
                .map_err(|b| blocked(format!("{name} resolves to {}", b.reason)))?;
        }
        Ok(addrs)
    }
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let this = self.clone();
        Box::pin(async move {
            let addrs = this.resolve_checked(name.as_str()).await?;
            let addrs: Addrs = Box::new(addrs.into_iter().map(|ip| SocketAddr::new(ip, 0)));
            Ok(addrs)
        })
    }
}

/// A client for model-chosen URLs: the guarded resolver, the host rule on every redirect
/// hop (at most [`MAX_REDIRECTS`]), no proxy, and `timeout` for the whole request.
pub fn guarded_client(
    tls: Arc<rustls::ClientConfig>,
    lookup: Arc<dyn Lookup>,
    allow_private: bool,
    timeout: Duration,
) -> reqwest::Result<reqwest::Client> {
    let policy = reqwest::redirect::Policy::custom(move |attempt| {
        if attempt.previous().len() > MAX_REDIRECTS {
            return attempt.error(blocked("too many redirects"));
        }
        match check_url(attempt.url(), allow_private) {
            Ok(()) => attempt.follow(),
            Err(refused) => attempt.error(refused),
        }
    });
    reqwest::Client::builder()
        .use_preconfigured_tls((*tls).clone())
        .no_proxy()
        .dns_resolver(Arc::new(GuardedResolver::new(lookup, allow_private)))
        .redirect(policy)
        .timeout(timeout)
        .connect_timeout(Duration::from_secs(10))
        .user_agent(concat!("hermesd/", env!("CARGO_PKG_VERSION")))
        .build()
}

/// The guard's refusal inside a client error (from the resolver or a redirect hop), if any.
pub fn blocked_in(error: &(dyn std::error::Error + 'static)) -> Option<Blocked> {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = current {
        if let Some(b) = e.downcast_ref::<Blocked>() {
            return Some(b.clone());
        }
        current = e.source();
    }
    None
}

#[cfg(test)]
#[path = "guard_tests.rs"]
mod tests;
