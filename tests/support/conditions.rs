//! Waiting on a condition with a bounded timeout (polled; the state polled is cheap to read).

use std::time::{Duration, Instant};

/// Polls `done` every 20 ms until it holds; panics naming `what` after `timeout`.
pub async fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < timeout, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    start.elapsed()
}
