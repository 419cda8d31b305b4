use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures_util::future::BoxFuture;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::tools::backend::{Exec, RunResult};

/// A backend that counts its shutdowns.
#[derive(Debug, Default)]
struct Counted {
    shutdowns: Arc<AtomicUsize>,
}

impl Backend for Counted {
    fn kind(&self) -> &'static str {
        "test"
    }
    fn default_cwd(&self) -> String {
        "/".to_owned()
    }
    fn host_roots(&self) -> Option<Vec<PathBuf>> {
        None
    }
    fn run<'a>(&'a self, _: &'a Exec, _: &'a CancellationToken) -> BackendFuture<'a, RunResult> {
        Box::pin(async {
            Ok(RunResult {
                output: String::new(),
                exit_code: 0,
                timed_out: false,
                interrupted: false,
            })
        })
    }
    fn read_file<'a>(&'a self, _: &'a str) -> BackendFuture<'a, Option<Vec<u8>>> {
        Box::pin(async { Ok(None) })
    }
    fn write_file<'a>(&'a self, _: &'a str, _: &'a [u8]) -> BackendFuture<'a, ()> {
        Box::pin(async { Ok(()) })
    }
    fn shutdown(&self) -> BoxFuture<'_, ()> {
        self.shutdowns.fetch_add(1, Ordering::SeqCst);
        Box::pin(async {})
    }
}

/// Opens a [`Counted`] backend once the scope's gate lets it (scope ids → permits).
#[derive(Default)]
struct Gated {
    opens: AtomicUsize,
    shutdowns: Arc<AtomicUsize>,
    gates: Mutex<BTreeMap<String, Arc<Semaphore>>>,
}

impl Gated {
    fn gate(&self, scope: &Scope) -> Arc<Semaphore> {
        let mut gates = self.gates.lock().unwrap();
        Arc::clone(
            gates
                .entry(scope.id())
                .or_insert_with(|| Arc::new(Semaphore::new(0))),
        )
    }
}

impl BackendFactory for Gated {
    fn kind(&self) -> &'static str {
        "test"
    }
    fn open<'a>(&'a self, scope: &'a Scope) -> BackendFuture<'a, Arc<dyn Backend>> {
        Box::pin(async move {
            let _permit = self.gate(scope).acquire_owned().await.expect("gate open");
            self.opens.fetch_add(1, Ordering::SeqCst);
            let backend: Arc<dyn Backend> = Arc::new(Counted {
                shutdowns: Arc::clone(&self.shutdowns),
            });
            Ok(backend)
        })
    }
    fn probe(&self) -> BackendFuture<'_, String> {
        Box::pin(async { Ok(String::new()) })
    }
}

fn chat(id: &str) -> Scope {
    Scope::Chat {
        platform: "t".to_owned(),
        chat_id: id.to_owned(),
    }
}

#[tokio::test]
async fn a_slow_open_holds_up_neither_other_scopes_nor_opens_twice() {
    let factory = Arc::new(Gated::default());
    let boxes = Arc::new(Sandboxes::new(factory.clone(), Duration::from_secs(60)));
    let (a, b) = (chat("a"), chat("b"));
    // Two first calls of A wait on A's gate...
    let first = tokio::spawn({
        let (boxes, a) = (Arc::clone(&boxes), a.clone());
        async move { boxes.get(&a).await.map(|_| ()) }
    });
    let second = tokio::spawn({
        let (boxes, a) = (Arc::clone(&boxes), a.clone());
        async move { boxes.get(&a).await.map(|_| ()) }
    });
    // ...while B opens and is used.
    factory.gate(&b).add_permits(1);
    boxes.get(&b).await.unwrap();
    factory.gate(&a).add_permits(2);
    first.await.unwrap().unwrap();
    second.await.unwrap().unwrap();
    assert_eq!(factory.opens.load(Ordering::SeqCst), 2, "A once, B once");
    assert_eq!(boxes.open_count().await, 2);
}

#[tokio::test(start_paused = true)]
async fn idle_backends_are_stopped_unless_a_call_holds_them() {
    let factory = Arc::new(Gated::default());
    let boxes = Sandboxes::new(factory.clone(), Duration::from_secs(60));
    let (a, b) = (chat("a"), chat("b"));
    factory.gate(&a).add_permits(2);
    factory.gate(&b).add_permits(1);
    let _held = boxes.get(&a).await.unwrap();
    drop(boxes.get(&b).await.unwrap());
    assert_eq!(boxes.reap_idle().await, 0, "nothing is idle yet");
    tokio::time::advance(Duration::from_secs(61)).await;
    assert_eq!(
        boxes.reap_idle().await,
        1,
        "B is idle and unheld; A is held"
    );
    assert_eq!(factory.shutdowns.load(Ordering::SeqCst), 1);
    assert_eq!(boxes.open_count().await, 1);
    drop(_held);
    assert_eq!(boxes.reap_idle().await, 1);
    assert_eq!(boxes.open_count().await, 0);
    // A scope used again after being reaped opens afresh.
    boxes.get(&a).await.unwrap();
    assert_eq!(factory.opens.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_discarded_backend_is_replaced_and_a_newer_one_is_kept() {
    let factory = Arc::new(Gated::default());
    let boxes = Sandboxes::new(factory.clone(), Duration::from_secs(60));
    let a = chat("a");
    factory.gate(&a).add_permits(2);
    let old = boxes.get(&a).await.unwrap();
    boxes.discard(&a, &old).await;
    let new = boxes.get(&a).await.unwrap();
    assert!(!Arc::ptr_eq(&old, &new));
    // A late discard of the old one leaves the new one alone.
    boxes.discard(&a, &old).await;
    assert!(Arc::ptr_eq(&boxes.get(&a).await.unwrap(), &new));
    boxes.shutdown().await;
    assert_eq!(factory.shutdowns.load(Ordering::SeqCst), 2);
    assert_eq!(boxes.open_count().await, 0);
}
