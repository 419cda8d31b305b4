//! The ssh backend when the shared connection cannot take another command: sshd's
//! `MaxSessions` (sshd_config(5), <https://man.openbsd.org/sshd_config#MaxSessions>) caps the
//! channels one connection may have open, 10 by default. A command beyond the cap gets a
//! connection of its own, and the command already running on the full one finishes there.

#[path = "ssh_support/calls.rs"]
mod calls;
#[path = "ssh_support/sshd.rs"]
mod sshd;

use std::sync::Arc;

use calls::{BOUND, exec, factory, open, read_fifo, run};
use sshd::Sshd;
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_connection_makes_way_for_a_new_one_and_its_command_finishes() {
    let sshd = Sshd::start_with(1);
    let f = factory(&sshd.settings(), None, sshd.dir());
    let backend = open(&f).await;
    let (ready, release) = (
        sshd.dir().join("ready.fifo"),
        sshd.dir().join("release.fifo"),
    );
    for fifo in [&ready, &release] {
        let made = std::process::Command::new("mkfifo").arg(fifo).status();
        assert!(made.expect("mkfifo").success());
    }
    let first = exec(
        &*backend,
        &format!(
            "echo go > '{}'; read line < '{}'; echo \"first $line\"",
            ready.display(),
            release.display()
        ),
    );
    let running = {
        let backend = Arc::clone(&backend);
        tokio::spawn(async move { backend.run(&first, &CancellationToken::new()).await })
    };
    let said = tokio::time::timeout(BOUND, read_fifo(ready))
        .await
        .expect("ready in time");
    assert_eq!(said.expect("fifo read"), "go\n");
    // The one session of the connection is taken: this command needs a second connection.
    let second = run(&*backend, &exec(&*backend, "echo second")).await;
    assert_eq!(second.output, "second\n");
    assert_eq!(f.connections_opened(), 2);
    let writer = std::thread::spawn(move || std::fs::write(release, "done\n"));
    let first = tokio::time::timeout(BOUND, running)
        .await
        .expect("first in time")
        .expect("join")
        .expect("first run");
    writer.join().expect("join").expect("write fifo");
    assert_eq!(first.output, "first done\n");
    assert_eq!(first.exit_code, 0);
}
