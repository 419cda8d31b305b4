//! Short forms of the backend calls the ssh tests make, each bounded in time.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use hermesd::config::{SshSettings, TerminalBackend, TerminalConfig};
use hermesd::tools::backend::{Backend, BackendError, BackendFactory, Exec, Scope, SshFactory};
use tokio_util::sync::CancellationToken;

/// Any wait in these tests gives up after this long.
pub const BOUND: Duration = Duration::from_secs(60);

pub fn terminal(cwd: Option<&str>) -> TerminalConfig {
    TerminalConfig {
        backend: TerminalBackend::Ssh,
        cwd: cwd.map(str::to_owned),
        ..TerminalConfig::default()
    }
}

pub fn factory(settings: &SshSettings, cwd: Option<&str>, home: &std::path::Path) -> SshFactory {
    SshFactory::new(settings, &terminal(cwd), home).expect("factory")
}

pub fn exec(backend: &dyn Backend, script: &str) -> Exec {
    Exec {
        script: script.to_owned(),
        cwd: backend.default_cwd(),
        env: BTreeMap::new(),
        timeout: BOUND,
        max_chars: 50_000,
    }
}

pub async fn open(factory: &SshFactory) -> Arc<dyn Backend> {
    tokio::time::timeout(BOUND, factory.open(&Scope::Shared))
        .await
        .expect("open in time")
        .expect("open")
}

pub async fn run(backend: &dyn Backend, exec: &Exec) -> hermesd::tools::backend::RunResult {
    tokio::time::timeout(BOUND * 2, backend.run(exec, &CancellationToken::new()))
        .await
        .expect("run in time")
        .expect("run")
}

pub fn unavailable(err: BackendError) -> String {
    match err {
        BackendError::Unavailable {
            kind: "ssh",
            detail,
        } => detail,
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

/// Reads a FIFO to its end on a thread of its own (opening it waits for a writer, the read
/// for every writer to close it). A detached thread, so a test that fails while the remote
/// side still holds the FIFO does not wait for it at exit.
pub fn read_fifo(path: std::path::PathBuf) -> tokio::sync::oneshot::Receiver<String> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let text = std::fs::read_to_string(&path).expect("read fifo");
        let _ = tx.send(text);
    });
    rx
}
