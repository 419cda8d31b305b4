//! Which proxy an outbound connection goes through, from the conventional variables
//! (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`, `NO_PROXY`, upper or lower case), read from the
//! environment map the daemon was given. One selection rule serves reqwest (through
//! `Proxy::custom`) and the WebSocket dialer alike, so REST and sockets never disagree.

use std::collections::BTreeMap;
use std::net::IpAddr;

use reqwest::Url;

/// A proxy's URL: `http://` (HTTP CONNECT, or absolute-form for plain `http://` targets),
/// `https://`, `socks5://` or `socks5h://`. Displayed without its password.
#[derive(Clone, PartialEq, Eq)]
pub struct ProxyUrl {
    pub url: Url,
    /// The variable it came from, for messages (`HTTPS_PROXY`).
    pub source: String,
}

impl std::fmt::Display for ProxyUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut shown = self.url.clone();
        if shown.password().is_some() {
            let _ = shown.set_password(Some("***"));
        }
        write!(
            f,
            "{} (from {})",
            shown.as_str().trim_end_matches('/'),
            self.source
        )
    }
}

impl std::fmt::Debug for ProxyUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

/// The proxy settings found in an environment map.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Proxies {
    pub https: Option<ProxyUrl>,
    pub http: Option<ProxyUrl>,
    pub all: Option<ProxyUrl>,
    /// `NO_PROXY` entries: `*`, host names (matching sub-domains too, with or without a
    /// leading dot) and IP addresses.
    pub no_proxy: Vec<String>,
}

/// The first non-empty of `NAME` and `name` (curl reads `http_proxy` in lower case only;
/// both spellings are common in the wild).
fn variable<'a>(env: &'a BTreeMap<String, String>, name: &str) -> Option<(&'a str, String)> {
    [name.to_owned(), name.to_ascii_lowercase()]
        .into_iter()
        .find_map(|key| {
            env.get(&key)
                .map(|v| v.trim())
                .filter(|v| !v.is_empty())
                .map(|v| (v, key))
        })
}

fn parse_proxy(value: &str, source: String) -> Result<ProxyUrl, String> {
    // `proxy:3128` without a scheme means an HTTP proxy, as curl reads it.
    let text = if value.contains("://") {
        value.to_owned()
    } else {
        format!("http://{value}")
    };
    let url = Url::parse(&text).map_err(|e| format!("{source}: not a proxy URL ({e})"))?;
    match url.scheme() {
        "http" | "https" | "socks5" | "socks5h" if url.host_str().is_some() => {
            Ok(ProxyUrl { url, source })
        }
        "http" | "https" | "socks5" | "socks5h" => Err(format!("{source}: the URL names no host")),
        other => Err(format!(
            "{source}: unsupported proxy scheme {other:?} (use http, https, socks5 or socks5h)"
        )),
    }
}

impl Proxies {
    /// Reads the proxy variables from `env`; errors name the variable, never its value
    /// (it may carry a password).
    pub fn from_env(env: &BTreeMap<String, String>) -> Result<Proxies, Vec<String>> {
        let mut errors = Vec::new();
        let mut read = |name: &str| match variable(env, name) {
            Some((value, source)) => match parse_proxy(value, source) {
                Ok(proxy) => Some(proxy),
                Err(error) => {
                    errors.push(error);
                    None
                }
            },
            None => None,
        };
        let proxies = Proxies {
            https: read("HTTPS_PROXY"),
            http: read("HTTP_PROXY"),
            all: read("ALL_PROXY"),
            no_proxy: variable(env, "NO_PROXY")
                .map(|(value, _)| {
                    value
                        .split(',')
                        .map(|entry| entry.trim().to_ascii_lowercase())
                        .filter(|entry| !entry.is_empty())
                        .collect()
                })
                .unwrap_or_default(),
        };
        if errors.is_empty() {
            Ok(proxies)
        } else {
            Err(errors)
        }
    }

    pub fn is_empty(&self) -> bool {
        self.https.is_none() && self.http.is_none() && self.all.is_none()
    }

    /// The proxy for a connection to `url` (`https`/`wss` use `HTTPS_PROXY`, `http`/`ws`
    /// use `HTTP_PROXY`, either falls back to `ALL_PROXY`), or `None` to connect directly.
    pub fn for_url(&self, url: &Url) -> Option<&ProxyUrl> {
        let host = url.host_str()?;
        if self.bypassed(host) {
            return None;
        }
        let specific = match url.scheme() {
            "https" | "wss" => self.https.as_ref(),
            "http" | "ws" => self.http.as_ref(),
            _ => None,
        };
        specific.or(self.all.as_ref())
    }

    fn bypassed(&self, host: &str) -> bool {
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        let host_ip = host.parse::<IpAddr>().ok();
        self.no_proxy.iter().any(|entry| {
            if entry == "*" {
                return true;
            }
            if let Ok(ip) = entry.parse::<IpAddr>() {
                return host_ip == Some(ip);
            }
            // A port in the entry (`example.com:8080`) is not compared: rare, and a bypass
            // that is slightly too wide only means a direct connection.
            let domain = entry.split(':').next().unwrap_or(entry);
            let domain = domain.trim_start_matches("*.").trim_start_matches('.');
            host == domain || host.ends_with(&format!(".{domain}"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn url(text: &str) -> Url {
        Url::parse(text).unwrap()
    }

    #[test]
    fn picks_by_scheme_falls_back_to_all_and_honours_no_proxy() {
        let proxies = Proxies::from_env(&env(&[
            ("HTTPS_PROXY", "http://secure:3128"),
            ("all_proxy", "socks5h://fallback:1080"),
            ("NO_PROXY", "internal.example, .corp, 10.0.0.5"),
        ]))
        .unwrap();
        let host = |u: &str| {
            proxies
                .for_url(&url(u))
                .map(|p| p.url.host_str().unwrap().to_owned())
        };
        assert_eq!(
            host("https://api.telegram.org/x").as_deref(),
            Some("secure")
        );
        assert_eq!(host("wss://gateway.discord.gg").as_deref(), Some("secure"));
        assert_eq!(host("ws://example.org").as_deref(), Some("fallback"));
        assert_eq!(host("https://internal.example/"), None);
        assert_eq!(host("https://a.internal.example/"), None);
        assert_eq!(host("https://x.corp/"), None);
        assert_eq!(host("http://10.0.0.5:8080/"), None);
        assert_eq!(
            host("https://notinternal.example/").as_deref(),
            Some("secure")
        );
    }

    #[test]
    fn bad_values_are_named_by_variable_without_the_value() {
        let errors = Proxies::from_env(&env(&[
            ("HTTPS_PROXY", "ftp://user:hunter2@proxy"),
            ("HTTP_PROXY", "proxy.local:3128"),
        ]))
        .unwrap_err();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].starts_with("HTTPS_PROXY: unsupported proxy scheme"),
            "{errors:?}"
        );
        assert!(!errors[0].contains("hunter2"));
    }

    #[test]
    fn a_password_is_never_displayed() {
        let proxies =
            Proxies::from_env(&env(&[("HTTPS_PROXY", "http://me:hunter2@proxy:3128")])).unwrap();
        let shown = proxies.https.unwrap().to_string();
        assert_eq!(shown, "http://me:***@proxy:3128 (from HTTPS_PROXY)");
    }

    #[test]
    fn no_proxy_star_bypasses_everything() {
        let proxies =
            Proxies::from_env(&env(&[("ALL_PROXY", "http://p:1"), ("no_proxy", "*")])).unwrap();
        assert!(proxies.for_url(&url("https://slack.com/api")).is_none());
        assert!(Proxies::from_env(&env(&[])).unwrap().is_empty());
    }
}
