//! The ssh terminal backend against a real OpenSSH server (tests/ssh_support/sshd.rs):
//! commands with their output, exit code, cwd and variables; one connection for many
//! commands; a timeout and an interrupt that kill the remote process; host keys unknown,
//! changed and unchecked; a client key the server refuses; binary files; and the server
//! dying mid-command, then coming back; a call dropped mid-command; a connection per call
//! without a persistent shell.
//!
//! Run: `cargo test --test terminal_ssh -- --nocapture` (prints the latency figures).

#[path = "ssh_support/calls.rs"]
mod calls;
#[path = "ssh_support/sshd.rs"]
mod sshd;

use std::sync::Arc;
use std::time::{Duration, Instant};

use calls::{BOUND, exec, factory, open, run, terminal, unavailable};
use hermesd::config::{SshSettings, TerminalConfig};
use hermesd::tools::backend::{BackendError, BackendFactory, Scope, SshFactory};
use sshd::{Sshd, processes_with};
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_return_output_and_exit_code() {
    let sshd = Sshd::start();
    let f = factory(&sshd.settings(), None, sshd.dir());
    let backend = open(&f).await;
    assert_eq!(backend.kind(), "ssh");
    assert!(backend.host_roots().is_none());
    let result = run(
        &*backend,
        &exec(
            &*backend,
            "echo out; echo err >&2; printf 'it'\\''s'; exit 3",
        ),
    )
    .await;
    assert_eq!(result.output, "out\nerr\nit's");
    assert_eq!(result.exit_code, 3);
    assert!(!result.timed_out && !result.interrupted);
    // Output is bounded as the local backend bounds it (head and tail kept).
    let mut long = exec(&*backend, "seq 1 20000");
    long.max_chars = 1000;
    let result = run(&*backend, &long).await;
    assert!(
        result.output.starts_with("1\n2\n"),
        "{}",
        &result.output[..40]
    );
    assert!(result.output.trim_end().ends_with("20000"));
    assert!(result.output.len() < 1500, "{}", result.output.len());
    assert_eq!(result.exit_code, 0);
    let probe = tokio::time::timeout(BOUND, f.probe())
        .await
        .expect("probe in time");
    assert_eq!(
        probe.expect("probe"),
        format!(
            "ssh {}@127.0.0.1:{} reachable (host key verified)",
            whoami(),
            sshd.port()
        )
    );
}

fn whoami() -> String {
    let out = std::process::Command::new("id")
        .arg("-un")
        .output()
        .expect("id");
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .trim()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cwd_and_environment_reach_the_command() {
    let sshd = Sshd::start();
    let work = sshd.dir().join("work dir");
    std::fs::create_dir(&work).expect("work dir");
    let f = factory(&sshd.settings(), Some(work.to_str().unwrap()), sshd.dir());
    let backend = open(&f).await;
    assert_eq!(backend.default_cwd(), work.display().to_string());
    let mut e = exec(
        &*backend,
        "pwd; printf '%s|%s\\n' \"$GREETING\" \"$OTHER\"; test -n \"$HOME\" && echo home-kept",
    );
    e.env
        .insert("GREETING".into(), "it's $HOME `id` \"q\"".into());
    e.env.insert("OTHER".into(), "two\nlines".into());
    let result = run(&*backend, &e).await;
    assert_eq!(
        result.output,
        format!(
            "{}\nit's $HOME `id` \"q\"|two\nlines\nhome-kept\n",
            work.display()
        )
    );
    // A name no shell can export is refused before anything runs.
    e.env.insert("NOT-A-NAME".into(), "x".into());
    let err = backend
        .run(&e, &CancellationToken::new())
        .await
        .expect_err("bad name");
    assert!(err.to_string().contains("NOT-A-NAME"), "{err}");

    // Without terminal.cwd a session starts in the remote home, written `~`.
    let f = factory(&sshd.settings(), None, sshd.dir());
    let backend = open(&f).await;
    assert_eq!(backend.default_cwd(), "~");
    let result = run(&*backend, &exec(&*backend, "pwd; echo \"$HOME\"")).await;
    let lines: Vec<&str> = result.output.lines().collect();
    assert_eq!(lines.len(), 2, "{}", result.output);
    assert_eq!(lines[0], lines[1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_share_one_connection_and_scopes_share_it_too() {
    let sshd = Sshd::start();
    let f = factory(&sshd.settings(), None, sshd.dir());
    let started = Instant::now();
    let backend = open(&f).await;
    let first = run(&*backend, &exec(&*backend, "true")).await;
    let cold = started.elapsed();
    assert_eq!(first.exit_code, 0);
    let mut warm = Vec::new();
    for _ in 0..10 {
        let started = Instant::now();
        let result = run(&*backend, &exec(&*backend, "true")).await;
        warm.push(started.elapsed());
        assert_eq!(result.exit_code, 0);
    }
    let other = tokio::time::timeout(
        BOUND,
        f.open(&Scope::Chat {
            platform: "telegram".into(),
            chat_id: "-100".into(),
        }),
    )
    .await
    .expect("in time")
    .expect("open");
    assert_eq!(run(&*other, &exec(&*other, "echo hi")).await.output, "hi\n");
    assert_eq!(f.connections_opened(), 1);
    assert_eq!(sshd.established_connections(), 1);
    warm.sort();
    eprintln!(
        "ssh latency: cold (connect + auth + `true`) {:?}; warm `true` median {:?}, max {:?} over {} runs",
        cold,
        warm[warm.len() / 2],
        warm[warm.len() - 1],
        warm.len()
    );
    // The connection closes only when the last scope's backend stops.
    backend.shutdown().await;
    assert_eq!(
        run(&*other, &exec(&*other, "echo still")).await.output,
        "still\n"
    );
    let err = backend
        .run(&exec(&*backend, "true"), &CancellationToken::new())
        .await
        .expect_err("stopped backend");
    assert!(err.is_gone(), "{err:?}");
    other.shutdown().await;
    assert_eq!(f.connections_opened(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_or_an_interrupt_kills_the_remote_command() {
    let sshd = Sshd::start();
    let f = factory(&sshd.settings(), None, sshd.dir());
    let backend = open(&f).await;
    let marker = format!("hermesd-timeout-marker-{}", sshd.port());
    let mut e = exec(
        &*backend,
        &format!(
            "echo started; sh -c 'sleep 600; :' {marker}-bg & sh -c 'sleep 600; :' {marker}-fg"
        ),
    );
    e.timeout = Duration::from_secs(5);
    let result = run(&*backend, &e).await;
    assert!(result.timed_out);
    assert_eq!(result.exit_code, 124);
    assert_eq!(result.output, "started\n\n[Command timed out after 5s]");
    assert_eq!(
        processes_with(&marker),
        Vec::<u32>::new(),
        "the command survived its timeout"
    );

    // An interrupt, sent once the command is known to run (it opened a FIFO for writing).
    let fifo = sshd.dir().join("ready.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let marker = format!("hermesd-interrupt-marker-{}", sshd.port());
    let mut e = exec(
        &*backend,
        &format!(
            "sh -c 'sleep 600; :' {marker}-bg & sh -c 'echo go > \"$1\"; sleep 600; :' {marker}-speaker '{}'",
            fifo.display()
        ),
    );
    // A value the command exports is in no command line another user could list.
    let secret = format!("value-of-a-passed-through-variable-{}", sshd.port());
    e.env.insert("PASSED_THROUGH".into(), secret.clone());
    let cancel = CancellationToken::new();
    let running = {
        let backend = Arc::clone(&backend);
        let cancel = cancel.clone();
        tokio::spawn(async move { backend.run(&e, &cancel).await })
    };
    let read = calls::read_fifo(fifo);
    let said = tokio::time::timeout(BOUND, read)
        .await
        .expect("fifo in time");
    assert_eq!(said.expect("fifo read"), "go\n");
    let speaker = format!("{marker}-speaker");
    // (Two for a moment while it forks its sleep.)
    assert!(!processes_with(&speaker).is_empty(), "the command runs");
    assert_eq!(processes_with(&secret), Vec::<u32>::new());
    assert_eq!(processes_with("PASSED_THROUGH"), Vec::<u32>::new());
    cancel.cancel();
    let result = tokio::time::timeout(BOUND, running)
        .await
        .expect("in time")
        .expect("join")
        .expect("run");
    assert!(result.interrupted);
    assert_eq!(result.exit_code, 130);
    assert_eq!(result.output, "\n[Command interrupted]");
    assert_eq!(
        processes_with(&marker),
        Vec::<u32>::new(),
        "the command survived its interrupt"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_or_changed_host_keys_are_refused_with_the_fingerprint() {
    let sshd = Sshd::start();
    let empty = sshd.dir().join("empty_known_hosts");
    std::fs::write(&empty, "").expect("write");
    let settings = SshSettings {
        known_hosts: Some(empty.clone()),
        ..sshd.settings()
    };
    let f = factory(&settings, None, sshd.dir());
    let err = tokio::time::timeout(BOUND, f.open(&Scope::Shared))
        .await
        .expect("in time")
        .expect_err("unknown host key");
    let detail = unavailable(err);
    let entry = format!("[127.0.0.1]:{}", sshd.port());
    assert!(detail.contains(&entry), "{detail}");
    assert!(detail.contains(&sshd.host_fingerprint), "{detail}");
    assert!(
        detail.contains(&format!(
            "ssh-keyscan -p {} 127.0.0.1 >> {}",
            sshd.port(),
            empty.display()
        )),
        "{detail}"
    );
    assert_eq!(f.connections_opened(), 0);

    // Another ed25519 key recorded for the same host: changed, refused, both named.
    let other = sshd.dir().join("other_host");
    sshd::keygen(&other, "");
    let public = std::fs::read_to_string(other.with_extension("pub")).expect("pub");
    let mut fields = public.split_whitespace();
    let changed = sshd.dir().join("changed_known_hosts");
    std::fs::write(
        &changed,
        format!(
            "# a comment\n{entry} {} {}\n",
            fields.next().unwrap(),
            fields.next().unwrap()
        ),
    )
    .expect("write");
    let f = factory(
        &SshSettings {
            known_hosts: Some(changed),
            ..sshd.settings()
        },
        None,
        sshd.dir(),
    );
    let detail = unavailable(f.probe().await.expect_err("changed host key"));
    assert!(detail.contains("CHANGED"), "{detail}");
    assert!(detail.contains("line 1"), "{detail}");
    assert!(detail.contains(&sshd.host_fingerprint), "{detail}");

    // Checking switched off: the same unknown key is accepted.
    let f = factory(
        &SshSettings {
            known_hosts: Some(empty),
            host_key_checking: false,
            ..sshd.settings()
        },
        None,
        sshd.dir(),
    );
    let backend = open(&f).await;
    assert_eq!(
        run(&*backend, &exec(&*backend, "echo in")).await.output,
        "in\n"
    );
    let probe = f.probe().await.expect("probe");
    assert!(probe.contains("host key NOT checked"), "{probe}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_the_server_refuses_or_cannot_be_read_give_clear_errors() {
    let sshd = Sshd::start();
    let stranger = sshd.dir().join("stranger_ed25519");
    sshd::keygen(&stranger, "");
    let f = factory(
        &SshSettings {
            key: Some(stranger.clone()),
            ..sshd.settings()
        },
        None,
        sshd.dir(),
    );
    let detail = unavailable(f.probe().await.expect_err("refused key"));
    assert!(detail.contains("refused the key"), "{detail}");
    assert!(detail.contains(&stranger.display().to_string()), "{detail}");
    let private = std::fs::read_to_string(&stranger).expect("key");
    for line in private.lines().filter(|l| !l.starts_with("-----")) {
        assert!(!detail.contains(line), "key material in: {detail}");
    }

    // A passphrase-protected key is refused when the backend is built, naming the file.
    let locked = sshd.dir().join("locked_ed25519");
    sshd::keygen(&locked, "correct horse");
    let err = SshFactory::new(
        &SshSettings {
            key: Some(locked.clone()),
            ..sshd.settings()
        },
        &terminal(None),
        sshd.dir(),
    )
    .expect_err("passphrase");
    assert!(
        err.contains("passphrase") && err.contains(&locked.display().to_string()),
        "{err}"
    );
    assert!(!err.contains("correct horse"));

    // No host; a key path that does not exist; no key at all in the home.
    let err = SshFactory::new(
        &SshSettings {
            host: None,
            ..sshd.settings()
        },
        &terminal(None),
        sshd.dir(),
    )
    .expect_err("no host");
    assert!(err.contains("terminal.ssh_host"), "{err}");
    let missing = sshd.dir().join("nope");
    let err = SshFactory::new(
        &SshSettings {
            key: Some(missing.clone()),
            ..sshd.settings()
        },
        &terminal(None),
        sshd.dir(),
    )
    .expect_err("missing key");
    assert!(err.contains(&missing.display().to_string()), "{err}");
    let home = tempfile::tempdir().expect("home");
    let err = SshFactory::new(
        &SshSettings {
            key: None,
            ..sshd.settings()
        },
        &terminal(None),
        home.path(),
    )
    .expect_err("no key in home");
    assert!(
        err.contains("id_ed25519") && err.contains("id_rsa"),
        "{err}"
    );
    // The default key is the home's ~/.ssh/id_ed25519.
    std::fs::create_dir(home.path().join(".ssh")).expect(".ssh");
    std::fs::copy(&sshd.client_key, home.path().join(".ssh/id_ed25519")).expect("copy key");
    let f = SshFactory::new(
        &SshSettings {
            key: None,
            ..sshd.settings()
        },
        &terminal(None),
        home.path(),
    )
    .expect("default key");
    assert_eq!(f.key_file(), home.path().join(".ssh/id_ed25519"));
    let backend = open(&f).await;
    assert_eq!(
        run(&*backend, &exec(&*backend, "echo ok")).await.output,
        "ok\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_round_trip_bytes_relative_to_the_cwd() {
    let sshd = Sshd::start();
    let work = sshd.dir().join("files");
    std::fs::create_dir(&work).expect("dir");
    let f = factory(&sshd.settings(), Some(work.to_str().unwrap()), sshd.dir());
    let backend = open(&f).await;
    let bytes: Vec<u8> = (0..=255u8)
        .cycle()
        .take(300_000)
        .chain([0xff, 0xfe, 0, b'\n'])
        .collect();
    backend
        .write_file("deep/er/it's.bin", &bytes)
        .await
        .expect("write");
    assert_eq!(
        std::fs::read(work.join("deep/er/it's.bin")).expect("on disk"),
        bytes
    );
    assert_eq!(
        backend.read_file("deep/er/it's.bin").await.expect("read"),
        Some(bytes.clone())
    );
    let absolute = work.join("abs.txt");
    backend
        .write_file(absolute.to_str().unwrap(), b"")
        .await
        .expect("write empty");
    assert_eq!(
        backend
            .read_file(absolute.to_str().unwrap())
            .await
            .expect("read"),
        Some(Vec::new())
    );
    assert_eq!(backend.read_file("missing.txt").await.expect("read"), None);
    match backend.read_file("deep").await {
        Err(BackendError::File(msg)) => assert!(msg.contains("deep"), "{msg}"),
        other => panic!("reading a directory: {other:?}"),
    }
    // A FIFO (or a device) would never end: only regular files are read.
    let fifo = work.join("pipe");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo")
            .success()
    );
    match backend.read_file("pipe").await {
        Err(BackendError::File(msg)) => assert!(msg.contains("not a regular file"), "{msg}"),
        other => panic!("reading a FIFO: {other:?}"),
    }
    std::fs::write(work.join("blocker"), "a file").expect("write");
    match backend.write_file("blocker/inside.txt", b"x").await {
        Err(BackendError::File(msg)) => assert!(msg.contains("blocker/inside.txt"), "{msg}"),
        other => panic!("writing under a file: {other:?}"),
    }
    assert_eq!(f.connections_opened(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_command_is_gone_then_a_restarted_one_serves_again() {
    let mut sshd = Sshd::start();
    let f = factory(&sshd.settings(), None, sshd.dir());
    let backend = open(&f).await;
    let fifo = sshd.dir().join("started.fifo");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo")
            .success()
    );
    let e = exec(
        &*backend,
        &format!("echo go > '{}'; sleep 600", fifo.display()),
    );
    let running = {
        let backend = Arc::clone(&backend);
        tokio::spawn(async move { backend.run(&e, &CancellationToken::new()).await })
    };
    let read = calls::read_fifo(fifo);
    let said = tokio::time::timeout(BOUND, read)
        .await
        .expect("fifo in time");
    assert_eq!(said.expect("fifo read"), "go\n");
    sshd.kill_all();
    let err = tokio::time::timeout(BOUND, running)
        .await
        .expect("in time")
        .expect("join")
        .expect_err("gone");
    assert!(err.is_gone(), "{err:?}");
    assert!(
        err.to_string().contains("dropped while the command ran"),
        "{err}"
    );

    // While the server is down the one reconnect fails: unavailable, saying where.
    let err = backend
        .run(&exec(&*backend, "true"), &CancellationToken::new())
        .await
        .expect_err("down");
    let detail = unavailable(err);
    assert!(
        detail.contains(&format!("127.0.0.1:{}", sshd.port())),
        "{detail}"
    );

    // Back on the same port: the same backend reconnects on its next call.
    sshd.restart();
    assert_eq!(
        run(&*backend, &exec(&*backend, "echo back")).await.output,
        "back\n"
    );
    assert_eq!(f.connections_opened(), 2);
    // And as the gateway does after Gone: discard, open anew.
    backend.shutdown().await;
    let fresh = open(&f).await;
    assert_eq!(
        run(&*fresh, &exec(&*fresh, "echo fresh")).await.output,
        "fresh\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_persistent_shell_each_call_has_its_own_connection() {
    let sshd = Sshd::start();
    let config = TerminalConfig {
        persistent_shell: false,
        ..terminal(None)
    };
    let f = SshFactory::new(&sshd.settings(), &config, sshd.dir()).expect("factory");
    let backend = open(&f).await;
    assert_eq!(
        run(&*backend, &exec(&*backend, "echo one")).await.output,
        "one\n"
    );
    backend.write_file("two.txt", b"2").await.expect("write");
    // The open's own check, the command and the write: three connections, none left open.
    assert_eq!(f.connections_opened(), 3);
}

/// A turn that stops waiting (its future dropped) still kills the remote command. The
/// command holds the write end of a FIFO the test reads: the read ends only when every
/// process of the command has died.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_dropped_mid_command_kills_the_remote_command() {
    let sshd = Sshd::start();
    let f = factory(&sshd.settings(), None, sshd.dir());
    let backend = open(&f).await;
    let (alive, ready) = (sshd.dir().join("alive.fifo"), sshd.dir().join("ready.fifo"));
    for fifo in [&alive, &ready] {
        let made = std::process::Command::new("mkfifo").arg(fifo).status();
        assert!(made.expect("mkfifo").success());
    }
    let e = exec(
        &*backend,
        &format!(
            "exec 3> '{}'; sleep 600 & echo go > '{}'; sleep 600",
            alive.display(),
            ready.display()
        ),
    );
    let until_dead = calls::read_fifo(alive);
    let running = {
        let backend = Arc::clone(&backend);
        tokio::spawn(async move { backend.run(&e, &CancellationToken::new()).await })
    };
    let read = calls::read_fifo(ready);
    let said = tokio::time::timeout(BOUND, read)
        .await
        .expect("ready in time");
    assert_eq!(said.expect("fifo read"), "go\n");
    running.abort();
    let rest = tokio::time::timeout(BOUND, until_dead)
        .await
        .expect("the command's processes died after the call was dropped");
    assert_eq!(rest.expect("fifo read"), "");
}
