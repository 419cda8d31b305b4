//! Reading what a child prints without letting a chatty one fill the daemon's memory.

use tokio::io::{AsyncRead, AsyncReadExt};

/// Reads a stream to its end, keeping the first `cap` bytes; returns them and the total.
pub async fn read_capped(stream: Option<impl AsyncRead + Unpin>, cap: usize) -> (Vec<u8>, usize) {
    let (mut kept, mut total) = (Vec::new(), 0);
    let Some(mut stream) = stream else {
        return (kept, total);
    };
    let mut buf = [0u8; 8192];
    while let Ok(n) = stream.read(&mut buf).await {
        if n == 0 {
            break;
        }
        total += n;
        let room = cap.saturating_sub(kept.len());
        kept.extend_from_slice(&buf[..n.min(room)]);
    }
    (kept, total)
}
