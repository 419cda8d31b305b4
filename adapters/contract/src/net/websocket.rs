//! WebSocket client connections (the Discord gateway, Slack Socket Mode) over the shared TLS
//! configuration, through the proxy the environment names for the URL.

use std::io;

use reqwest::Url;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::handshake::client::Response;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{self, Error};
use tokio_tungstenite::{Connector, MaybeTlsStream, WebSocketStream, client_async_tls_with_config};

use super::{Net, dial};

/// A client WebSocket as the adapters use it (the same type `connect_async` gives).
pub type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

impl Net {
    /// Opens a WebSocket to `url` (`ws://` or `wss://`): TCP directly or through the proxy,
    /// then TLS with the shared configuration, then the upgrade. A certificate the trust
    /// store does not accept fails with rustls' reason (`invalid peer certificate: ...`).
    pub async fn connect_websocket(
        &self,
        url: &str,
        config: Option<WebSocketConfig>,
    ) -> Result<(Socket, Response), Error> {
        let parsed =
            Url::parse(url).map_err(|_| Error::Url(tungstenite::error::UrlError::NoHostName))?;
        let host = match parsed.host() {
            Some(url::Host::Ipv6(address)) => address.to_string(),
            Some(host) => host.to_string(),
            None => return Err(Error::Url(tungstenite::error::UrlError::NoHostName)),
        };
        let port = parsed.port_or_known_default().ok_or(Error::Url(
            tungstenite::error::UrlError::UnsupportedUrlScheme,
        ))?;
        let stream = dial::tcp(&host, port, self.proxies().for_url(&parsed))
            .await
            .map_err(Error::Io)?;
        let connector = Connector::Rustls(self.tls_config());
        client_async_tls_with_config(url, stream, config, Some(connector)).await
    }

    /// Connects to `url`'s host (through the proxy when one applies) and completes a TLS
    /// handshake with the shared configuration, nothing more: `doctor`'s check that the
    /// path to a platform and its certificate are accepted.
    pub async fn probe_tls(&self, url: &str) -> Result<(), String> {
        let parsed = Url::parse(url).map_err(|e| format!("{url}: {e}"))?;
        let host = parsed
            .host_str()
            .ok_or_else(|| format!("{url}: no host"))?
            .to_owned();
        let port = parsed.port_or_known_default().unwrap_or(443);
        let stream = dial::tcp(
            host.trim_start_matches('[').trim_end_matches(']'),
            port,
            self.proxies().for_url(&parsed),
        )
        .await
        .map_err(|e| e.to_string())?;
        let name = rustls::pki_types::ServerName::try_from(
            host.trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned(),
        )
        .map_err(|e| format!("{host}: {e}"))?;
        let connector = tokio_rustls::TlsConnector::from(self.tls_config());
        connector
            .connect(name, stream)
            .await
            .map(|_| ())
            .map_err(|e: io::Error| super::error_chain(&e))
    }
}
