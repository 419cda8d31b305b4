//! `hermesd health`: the container HEALTHCHECK. GETs `/health` on the running daemon's admin
//! API (the address comes from the same config the daemon reads) and exits 0 on `200 OK`,
//! 1 otherwise — so the runtime image needs no curl. Plain HTTP/1.1 over a std socket: no
//! runtime to start for one request.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use super::EXIT_FAILURE;
use crate::config;
use crate::home::HermesHome;

#[derive(Debug, clap::Args)]
pub struct HealthArgs {
    /// Seconds to wait for the answer.
    #[arg(long, default_value_t = 5, value_name = "SECONDS")]
    pub timeout: u64,
    /// Probe this address instead of the configured admin API (host:port).
    #[arg(long, value_name = "HOST:PORT")]
    pub addr: Option<String>,
}

pub fn run(home: &HermesHome, env: &BTreeMap<String, String>, args: &HealthArgs) -> i32 {
    let target = match &args.addr {
        Some(addr) => addr.clone(),
        None => match config::load(home, env) {
            Ok(loaded) => admin_target(&loaded.config.admin),
            Err(errors) => {
                eprintln!(
                    "unhealthy: the configuration does not load:\n{}",
                    crate::logging::mask(&errors.to_string())
                );
                return EXIT_FAILURE;
            }
        },
    };
    let timeout = Duration::from_secs(args.timeout.max(1));
    match probe(&target, timeout) {
        Ok(()) => {
            println!("healthy: http://{target}/health answered 200");
            0
        }
        Err(reason) => {
            eprintln!("unhealthy: http://{target}/health: {reason}");
            EXIT_FAILURE
        }
    }
}

/// `host:port` of the admin API; `localhost` is spelled 127.0.0.1 as the daemon binds it.
pub(super) fn admin_target(admin: &config::AdminConfig) -> String {
    let host = admin.host.trim_start_matches('[').trim_end_matches(']');
    if host.eq_ignore_ascii_case("localhost") {
        format!("127.0.0.1:{}", admin.port)
    } else if host.contains(':') {
        format!("[{host}]:{}", admin.port)
    } else {
        format!("{host}:{}", admin.port)
    }
}

/// Why the admin endpoint did not report healthy; each step that can fail has its variant.
#[derive(Debug, thiserror::Error)]
enum ProbeError {
    #[error("bad address: {0}")]
    Address(#[source] std::io::Error),
    #[error("the address resolves to nothing")]
    Unresolved,
    #[error("cannot connect: {0}")]
    Connect(#[source] std::io::Error),
    #[error(transparent)]
    Timeouts(std::io::Error),
    #[error("cannot send the request: {0}")]
    Send(#[source] std::io::Error),
    #[error("no answer: {0}")]
    Receive(#[source] std::io::Error),
    #[error("answered {code}")]
    Status { code: String },
    #[error("the answer is not HTTP")]
    NotHttp,
}

/// One `GET /health`; Ok only for status 200.
fn probe(target: &str, timeout: Duration) -> Result<(), ProbeError> {
    let addr: SocketAddr = target
        .to_socket_addrs()
        .map_err(ProbeError::Address)?
        .next()
        .ok_or(ProbeError::Unresolved)?;
    let mut stream = TcpStream::connect_timeout(&addr, timeout).map_err(ProbeError::Connect)?;
    stream
        .set_read_timeout(Some(timeout))
        .and_then(|()| stream.set_write_timeout(Some(timeout)))
        .map_err(ProbeError::Timeouts)?;
    let request = format!(
        "GET /health HTTP/1.1\r\nHost: {target}\r\nConnection: close\r\nAccept: */*\r\n\r\n"
    );
    stream
        .write_all(request.as_bytes())
        .map_err(ProbeError::Send)?;
    let mut head = Vec::with_capacity(256);
    let mut buf = [0u8; 256];
    // The status line is all we need; stop reading once it is complete.
    while !head.contains(&b'\n') {
        let n = stream.read(&mut buf).map_err(ProbeError::Receive)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&head);
    let status_line = text.lines().next().unwrap_or_default();
    match status_line.split_whitespace().nth(1) {
        Some("200") => Ok(()),
        Some(code) => Err(ProbeError::Status {
            code: code.to_owned(),
        }),
        None => Err(ProbeError::NotHttp),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admin_targets() {
        let admin = |host: &str| config::AdminConfig {
            host: host.to_owned(),
            port: 8643,
            ..Default::default()
        };
        assert_eq!(admin_target(&admin("127.0.0.1")), "127.0.0.1:8643");
        assert_eq!(admin_target(&admin("localhost")), "127.0.0.1:8643");
        assert_eq!(admin_target(&admin("::1")), "[::1]:8643");
        assert_eq!(admin_target(&admin("[::1]")), "[::1]:8643");
    }
}
