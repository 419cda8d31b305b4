//! Every client `Net::http_client` builds keeps at most `IDLE_CONNECTIONS_PER_HOST` idle
//! keep-alive connections to a host after a burst; with reqwest's defaults each of the
//! burst's connections would stay open, idle, for 90 s.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use hermes_adapter::net::{IDLE_CONNECTIONS_PER_HOST, Net};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::Notify;

const BURST: usize = 16;

/// An HTTP/1.1 keep-alive server that holds every first answer until `BURST` connections
/// are open (so the client cannot reuse one), and counts the connections still open.
async fn server() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let open = Arc::new(AtomicUsize::new(0));
    let accepted = Arc::new(AtomicUsize::new(0));
    let all_in = Arc::new(Notify::new());
    let counter = open.clone();
    tokio::spawn(async move {
        loop {
            let (mut socket, _) = listener.accept().await.unwrap();
            counter.fetch_add(1, Ordering::SeqCst);
            if accepted.fetch_add(1, Ordering::SeqCst) + 1 == BURST {
                all_in.notify_waiters();
            }
            let (counter, accepted, all_in) = (counter.clone(), accepted.clone(), all_in.clone());
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let mut first = true;
                loop {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {}
                    }
                    if first {
                        first = false;
                        let waiting = all_in.notified();
                        if accepted.load(Ordering::SeqCst) < BURST {
                            waiting.await;
                        }
                    }
                    let answer = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                    if socket.write_all(answer.as_bytes()).await.is_err() {
                        break;
                    }
                }
                counter.fetch_sub(1, Ordering::SeqCst);
            });
        }
    });
    (url, open)
}

#[tokio::test]
async fn a_burst_leaves_only_a_few_idle_connections_open() {
    let (url, open) = server().await;
    let client = Net::direct().http_client().build().unwrap();
    let calls: Vec<_> = (0..BURST)
        .map(|_| {
            let (client, url) = (client.clone(), url.clone());
            tokio::spawn(async move { client.get(url).send().await?.text().await })
        })
        .collect();
    for call in calls {
        assert_eq!(call.await.unwrap().unwrap(), "ok");
    }
    // Connections past the idle bound are closed as they return to the pool.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while open.load(Ordering::SeqCst) > IDLE_CONNECTIONS_PER_HOST {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} connections still open after the burst (bound {IDLE_CONNECTIONS_PER_HOST})",
            open.load(Ordering::SeqCst)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(client);
}
