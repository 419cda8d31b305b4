//! Outbound networking shared by the core and every adapter: one TLS configuration (OS
//! store + Mozilla bundle + extra CA files, rustls/ring) and one proxy rule (`HTTPS_PROXY`,
//! `HTTP_PROXY`, `ALL_PROXY`, `NO_PROXY`), applied to reqwest clients
//! ([`Net::http_client`]) and to WebSocket connections ([`Net::connect_websocket`]) alike.
//!
//! Settings come from the environment map the program was given (never the process
//! environment) plus the `tls.ca_certificates` config key. A [`Net`] is cheap to clone; the
//! TLS configuration inside is built once per distinct [`NetSettings`].

mod dial;
mod proxy;
mod tls;
mod websocket;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Serialize, Serializer};

pub use proxy::{Proxies, ProxyUrl};
pub use tls::{CaFile, RootCounts};
pub use websocket::Socket;

/// Idle keep-alive connections kept per host by every client [`Net::http_client`] builds.
pub const IDLE_CONNECTIONS_PER_HOST: usize = 4;
/// How long an idle keep-alive connection is kept before it is closed.
pub const IDLE_CONNECTION_TIMEOUT: Duration = Duration::from_secs(30);

/// What outbound connections need to know: the proxies and the extra trusted CA files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetSettings {
    pub proxies: Proxies,
    pub ca_files: Vec<CaFile>,
}

impl NetSettings {
    /// The proxy variables and `SSL_CERT_FILE` from `env`, plus `ca_certificates` (the
    /// config key's paths). Errors name the variable or key.
    pub fn from_env(
        env: &BTreeMap<String, String>,
        ca_certificates: &[PathBuf],
    ) -> Result<NetSettings, Vec<String>> {
        let proxies = Proxies::from_env(env)?;
        let mut ca_files: Vec<CaFile> = env
            .get("SSL_CERT_FILE")
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
            .map(|path| CaFile {
                path: PathBuf::from(path),
                source: "SSL_CERT_FILE".to_owned(),
            })
            .into_iter()
            .collect();
        ca_files.extend(ca_certificates.iter().enumerate().map(|(i, path)| CaFile {
            path: path.clone(),
            source: format!("tls.ca_certificates[{i}]"),
        }));
        Ok(NetSettings { proxies, ca_files })
    }
}

impl Serialize for NetSettings {
    /// For `config show`: proxies with passwords masked, CA files by path.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let shown = |p: &Option<ProxyUrl>| p.as_ref().map(ToString::to_string);
        serde_json::json!({
            "https_proxy": shown(&self.proxies.https),
            "http_proxy": shown(&self.proxies.http),
            "all_proxy": shown(&self.proxies.all),
            "no_proxy": self.proxies.no_proxy,
            "ca_files": self.ca_files,
        })
        .serialize(serializer)
    }
}

/// Why the network settings cannot be used; each message names its variable, key or file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.join("; "))]
pub struct NetError(pub Vec<String>);

struct Inner {
    settings: NetSettings,
    tls: Arc<rustls::ClientConfig>,
    roots: RootCounts,
}

/// The shared outbound networking: clone it freely.
#[derive(Clone)]
pub struct Net {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Net {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Net")
            .field("proxies", &self.inner.settings.proxies)
            .field("roots", &self.inner.roots)
            .finish_non_exhaustive()
    }
}

/// The [`Net`]s built so far (a process sees one or two distinct settings: the configured
/// ones, and the direct default tests and tools use), so every client shares one TLS
/// configuration (its root store holds a few hundred certificates) instead of building its
/// own. Bounded: a long run of SIGHUP reloads with changing settings cannot grow it.
static BUILT: Mutex<Vec<Net>> = Mutex::new(Vec::new());
const MAX_BUILT: usize = 4;

impl Net {
    /// The networking for `settings`, built once per distinct settings (the same settings
    /// give a clone of the same configuration).
    pub fn new(settings: &NetSettings) -> Result<Net, NetError> {
        let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(net) = built.iter().find(|n| &n.inner.settings == settings) {
            return Ok(net.clone());
        }
        let (tls, roots) = tls::client_config(&settings.ca_files).map_err(NetError)?;
        let net = Net {
            inner: Arc::new(Inner {
                settings: settings.clone(),
                tls,
                roots,
            }),
        };
        if built.len() == MAX_BUILT {
            built.remove(0);
        }
        built.push(net.clone());
        Ok(net)
    }

    /// The networking the environment map alone describes (proxy variables,
    /// `SSL_CERT_FILE`): what an adapter uses until the core hands it the configured one.
    pub fn from_env(env: &BTreeMap<String, String>) -> Result<Net, Vec<String>> {
        let settings = NetSettings::from_env(env, &[])?;
        Net::new(&settings).map_err(|e| e.0)
    }

    /// No proxy, no extra CA: the OS store and the Mozilla bundle (tests, tools).
    pub fn direct() -> Net {
        Net::new(&NetSettings::default()).expect("no extra CA file, nothing can fail")
    }

    pub fn settings(&self) -> &NetSettings {
        &self.inner.settings
    }

    pub fn proxies(&self) -> &Proxies {
        &self.inner.settings.proxies
    }

    pub fn roots(&self) -> RootCounts {
        self.inner.roots
    }

    /// The shared rustls configuration (no ALPN: HTTP/1.1 and WebSockets).
    pub fn tls_config(&self) -> Arc<rustls::ClientConfig> {
        self.inner.tls.clone()
    }

    /// A reqwest builder on the shared TLS configuration whose proxy choice is
    /// [`Proxies::for_url`]; the process environment's proxy variables are not consulted.
    /// Callers add their own timeouts and headers.
    ///
    /// Idle keep-alive connections are bounded per host: a burst (2,000 Slack envelopes, a
    /// flood of model calls) opens many connections at once, and reqwest's defaults keep every
    /// one of them idle for 90 s, so the soak saw descriptors swing 18 → 32. A chat platform
    /// or a model host needs a handful between bursts.
    pub fn http_client(&self) -> reqwest::ClientBuilder {
        let builder = reqwest::Client::builder()
            .use_preconfigured_tls((*self.inner.tls).clone())
            .pool_max_idle_per_host(IDLE_CONNECTIONS_PER_HOST)
            .pool_idle_timeout(IDLE_CONNECTION_TIMEOUT)
            .no_proxy();
        if self.proxies().is_empty() {
            return builder;
        }
        let proxies = self.proxies().clone();
        builder.proxy(reqwest::Proxy::custom(move |url| {
            proxies.for_url(url).map(|proxy| proxy.url.clone())
        }))
    }
}

impl Default for Net {
    fn default() -> Self {
        Net::direct()
    }
}

/// An error with all its causes (`a: b: c`), for logs: reqwest's and tungstenite's own
/// messages stop at "error sending request", while the reason (a refused certificate, a
/// refused CONNECT) is further down the chain. Repeated texts are shown once.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut parts = vec![error.to_string()];
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !parts.last().is_some_and(|last| last.contains(&text)) {
            parts.push(text);
        }
        source = cause.source();
    }
    parts.join(": ")
}
