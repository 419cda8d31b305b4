//! Liveness of an adapter that receives over its own HTTP listener (WhatsApp's and the
//! signed webhooks' endpoints): the platform may stay silent for hours, so progress is the
//! listener answering its own `GET /health`, asked every [`SELF_CHECK_EVERY`].

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use tokio::task::JoinHandle;

use crate::{AdapterContext, AdapterError};

/// How often the listener is asked.
pub const SELF_CHECK_EVERY: Duration = Duration::from_secs(15);

/// The liveness window of such an adapter (`Adapter::liveness_window`): three missed checks
/// in a row are tolerated, the fourth restarts it.
pub const LIVENESS_WINDOW: Duration = Duration::from_secs(SELF_CHECK_EVERY.as_secs() * 4);

/// The URL a listener bound to `addr` answers its health check on: a wildcard address is
/// asked through the loopback of its family.
pub fn self_check_url(addr: SocketAddr) -> String {
    let ip = match addr.ip() {
        ip if ip.is_unspecified() && ip.is_ipv4() => IpAddr::from([127, 0, 0, 1]),
        ip if ip.is_unspecified() => IpAddr::from(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    format!("http://{}/health", SocketAddr::new(ip, addr.port()))
}

/// Watches a listener bound to `addr` whose server runs as `serving` (graceful on
/// `ctx.shutdown`): reports progress each time it answers, returns `Ok` once shutdown has
/// let the server finish, and a retryable error naming `what` when the server ends first.
pub async fn watch_listener(
    addr: SocketAddr,
    mut serving: JoinHandle<std::io::Result<()>>,
    ctx: &AdapterContext,
    what: &str,
) -> Result<(), AdapterError> {
    let probe = self_check_url(addr);
    let plain = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| AdapterError::Fatal(e.to_string()))?;
    loop {
        let answered = plain.get(&probe).send().await;
        if answered.is_ok_and(|r| r.status().is_success()) {
            ctx.progress.report();
        }
        tokio::select! {
            () = ctx.shutdown.cancelled() => break,
            ended = &mut serving => {
                return Err(AdapterError::Retryable(format!("{what} stopped: {ended:?}")));
            }
            () = tokio::time::sleep(SELF_CHECK_EVERY) => {}
        }
    }
    let _ = serving.await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wildcard_address_is_asked_through_its_loopback() {
        let url = |s: &str| self_check_url(s.parse().unwrap());
        assert_eq!(url("0.0.0.0:8644"), "http://127.0.0.1:8644/health");
        assert_eq!(url("[::]:8644"), "http://[::1]:8644/health");
        assert_eq!(url("10.1.2.3:80"), "http://10.1.2.3:80/health");
    }
}
