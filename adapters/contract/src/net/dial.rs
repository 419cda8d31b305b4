//! Opening a TCP stream to a host, directly or through a proxy: HTTP CONNECT (RFC 9110
//! §9.3.6) or SOCKS5 (RFC 1928). Used for WebSockets, which reqwest does not carry, and for
//! `doctor`'s TLS handshake probe; REST calls go through reqwest's own proxy support.

use std::io;

use base64::Engine;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::proxy::ProxyUrl;

/// The longest proxy answer head we read before giving up on it.
const MAX_HEAD: usize = 16 * 1024;

fn other(message: String) -> io::Error {
    io::Error::other(message)
}

/// A TCP stream to `host:port`, through `proxy` when there is one.
pub async fn tcp(host: &str, port: u16, proxy: Option<&ProxyUrl>) -> io::Result<TcpStream> {
    let stream = match proxy {
        None => TcpStream::connect((host, port)).await?,
        Some(proxy) => match proxy.url.scheme() {
            "http" => connect_tunnel(proxy, host, port).await?,
            "socks5" | "socks5h" => socks(proxy, host, port).await?,
            other => {
                return Err(other_scheme(proxy, other));
            }
        },
    };
    stream.set_nodelay(true)?;
    Ok(stream)
}

fn other_scheme(proxy: &ProxyUrl, scheme: &str) -> io::Error {
    other(format!(
        "proxy {proxy}: {scheme}:// proxies carry HTTP requests only; use an http:// or socks5:// \
         proxy for WebSocket connections"
    ))
}

fn proxy_addr(proxy: &ProxyUrl) -> io::Result<(String, u16)> {
    let host = proxy
        .url
        .host_str()
        .ok_or_else(|| other(format!("proxy {proxy}: no host")))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let port = proxy.url.port_or_known_default().unwrap_or(1080);
    Ok((host, port))
}

fn credentials(proxy: &ProxyUrl) -> Option<(String, String)> {
    if proxy.url.username().is_empty() {
        return None;
    }
    let decode = |text: &str| {
        percent_encoding::percent_decode_str(text)
            .decode_utf8_lossy()
            .into_owned()
    };
    Some((
        decode(proxy.url.username()),
        decode(proxy.url.password().unwrap_or("")),
    ))
}

async fn connect_tunnel(proxy: &ProxyUrl, host: &str, port: u16) -> io::Result<TcpStream> {
    let (proxy_host, proxy_port) = proxy_addr(proxy)?;
    let mut stream = TcpStream::connect((proxy_host.as_str(), proxy_port))
        .await
        .map_err(|e| other(format!("cannot reach proxy {proxy}: {e}")))?;
    let authority = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    let mut head = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n");
    if let Some((user, password)) = credentials(proxy) {
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        head.push_str(&format!("Proxy-Authorization: Basic {token}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await?;
    // Byte by byte up to the blank line: nothing of the tunnelled stream may be consumed.
    let mut answer = Vec::with_capacity(256);
    while !answer.ends_with(b"\r\n\r\n") {
        if answer.len() >= MAX_HEAD {
            return Err(other(format!(
                "proxy {proxy}: CONNECT answer head too long"
            )));
        }
        let mut byte = [0u8; 1];
        if stream.read(&mut byte).await? == 0 {
            return Err(other(format!(
                "proxy {proxy} closed the connection during CONNECT to {authority}"
            )));
        }
        answer.push(byte[0]);
    }
    let status_line = String::from_utf8_lossy(&answer)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned();
    let status = status_line.split_whitespace().nth(1).unwrap_or_default();
    if status.len() == 3 && status.starts_with('2') {
        Ok(stream)
    } else {
        Err(other(format!(
            "proxy {proxy} refused CONNECT to {authority}: {status_line}"
        )))
    }
}

async fn socks(proxy: &ProxyUrl, host: &str, port: u16) -> io::Result<TcpStream> {
    let (proxy_host, proxy_port) = proxy_addr(proxy)?;
    let proxy_at = (proxy_host.as_str(), proxy_port);
    // socks5:// resolves the name here, socks5h:// lets the proxy resolve it (curl's rule).
    let target: (String, u16) = if proxy.url.scheme() == "socks5" {
        let resolved = tokio::net::lookup_host((host, port))
            .await?
            .next()
            .ok_or_else(|| other(format!("{host}: no address")))?;
        (resolved.ip().to_string(), port)
    } else {
        (host.to_owned(), port)
    };
    let target = (target.0.as_str(), target.1);
    let result = match credentials(proxy) {
        Some((user, password)) => {
            tokio_socks::tcp::Socks5Stream::connect_with_password(
                proxy_at, target, &user, &password,
            )
            .await
        }
        None => tokio_socks::tcp::Socks5Stream::connect(proxy_at, target).await,
    };
    result
        .map(|stream| stream.into_inner())
        .map_err(|e| other(format!("SOCKS proxy {proxy} to {host}:{port}: {e}")))
}
