//! The docker backend against a wire-level fake of the Engine API (tests/support/fake_docker):
//! what the create request asks for (limits, no network, hardening, labels), output and exit
//! codes, a timeout and an interrupt that issue the kill program for the command's own
//! token, a container that dies mid-command or is removed reported gone and replaced through
//! `Sandboxes`, engine errors that are not "gone", files, image pull, name conflicts, the
//! storage driver without a size option, the sweep and the probe.

#[path = "support/fake_docker/mod.rs"]
mod fake_docker;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use fake_docker::{FakeDocker, IMAGE};
use hermesd::config::{DockerSettings, TerminalConfig};
use hermesd::tools::backend::{
    BackendError, BackendFactory, DockerFactory, Exec, Sandboxes, Scope,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

fn settings(fake: &FakeDocker) -> DockerSettings {
    DockerSettings {
        image: IMAGE.to_owned(),
        network: false,
        cpu: 1.5,
        memory_mb: 512,
        disk_mb: 2048,
        persistent: false,
        host: Some(fake.host()),
        ..DockerSettings::default()
    }
}

fn factory_with(settings: &DockerSettings, home: &std::path::Path) -> DockerFactory {
    DockerFactory::new(settings, &TerminalConfig::default(), home).expect("settings")
}

fn exec(script: &str, timeout: Duration) -> Exec {
    Exec {
        script: script.to_owned(),
        cwd: "/root".to_owned(),
        env: BTreeMap::from([("WHO".to_owned(), "tester".to_owned())]),
        timeout,
        max_chars: 10_000,
    }
}

fn chat(id: &str) -> Scope {
    Scope::Chat {
        platform: "telegram".to_owned(),
        chat_id: id.to_owned(),
    }
}

fn only_container(fake: &FakeDocker) -> (String, Value) {
    let state = fake.state();
    assert_eq!(state.containers.len(), 1, "{:?}", state.containers.keys());
    let c = state.containers.values().next().expect("one");
    (c.id.clone(), c.body.clone())
}

#[tokio::test]
async fn the_create_request_carries_limits_hardening_labels_and_no_network() {
    let fake = FakeDocker::start().await;
    let home = tempfile::tempdir().expect("home");
    let factory = factory_with(&settings(&fake), home.path());
    let scope = chat("-100");
    factory.open(&scope).await.expect("open");
    let (_, body) = only_container(&fake);
    let host = &body["HostConfig"];
    assert_eq!(host["NetworkMode"], "none");
    assert_eq!(host["NanoCpus"], 1_500_000_000i64);
    assert_eq!(host["Memory"], 512 * 1024 * 1024);
    assert_eq!(host["PidsLimit"], 256);
    assert_eq!(host["CapDrop"], serde_json::json!(["ALL"]));
    assert_eq!(
        host["CapAdd"],
        serde_json::json!(["DAC_OVERRIDE", "CHOWN", "FOWNER", "SETUID", "SETGID"])
    );
    assert_eq!(
        host["SecurityOpt"],
        serde_json::json!(["no-new-privileges"])
    );
    assert_eq!(host["StorageOpt"]["size"], "2048M");
    for dir in ["/tmp", "/root", "/workspace"] {
        assert!(host["Tmpfs"][dir].is_string(), "{dir} tmpfs: {host}");
    }
    assert_eq!(body["Image"], IMAGE);
    assert_eq!(body["Labels"]["hermesd"], "1");
    assert_eq!(body["Labels"]["hermesd.scope"], scope.id());
    let home_label = body["Labels"]["hermesd.home"].as_str().expect("home label");
    assert_eq!(home_label.len(), 16);
    let name = fake
        .state()
        .containers
        .values()
        .next()
        .expect("c")
        .name
        .clone();
    assert_eq!(
        name,
        format!("/hermesd-{}-{}", &home_label[..8], scope.id())
    );
    // The chat id never appears in what the engine sees.
    assert!(!body.to_string().contains("-100"), "{body}");
    let keep_alive = body["Cmd"].as_array().expect("cmd");
    assert_eq!(keep_alive[0], "sh");
    assert!(fake.state().containers.values().all(|c| c.running));

    // With docker_network the default network stays.
    let fake2 = FakeDocker::start().await;
    let networked = DockerSettings {
        network: true,
        ..settings(&fake2)
    };
    factory_with(&networked, home.path())
        .open(&scope)
        .await
        .expect("open networked");
    let (_, body) = only_container(&fake2);
    assert!(body["HostConfig"]["NetworkMode"].is_null(), "{body}");
}

#[tokio::test]
async fn commands_merge_output_keep_the_exit_code_and_see_their_env() {
    let fake = FakeDocker::start().await;
    let home = tempfile::tempdir().expect("home");
    let backend = factory_with(&settings(&fake), home.path())
        .open(&Scope::Shared)
        .await
        .expect("open");
    let done = backend
        .run(
            &exec("echo hello $WHO; err oops; exit 3", Duration::from_secs(30)),
            &CancellationToken::new(),
        )
        .await
        .expect("run");
    assert_eq!(done.output, "hello tester\noops\n");
    assert_eq!(done.exit_code, 3);
    assert!(!done.timed_out && !done.interrupted);
    let state = fake.state();
    let wrapper = state
        .execs
        .values()
        .find(|e| e.cmd.get(2).is_some_and(|p| p.contains("hermesd-end")))
        .expect("wrapper exec");
    assert_eq!(wrapper.cmd[..2], ["sh".to_owned(), "-c".to_owned()]);
    assert!(wrapper.env.contains(&"WHO=tester".to_owned()));
}

#[tokio::test]
async fn a_timeout_and_an_interrupt_kill_the_command_by_its_token() {
    let fake = FakeDocker::start().await;
    let home = tempfile::tempdir().expect("home");
    let backend = factory_with(&settings(&fake), home.path())
        .open(&Scope::Shared)
        .await
        .expect("open");
    let timed = backend
        .run(
            &exec("echo started; hang", Duration::from_secs(1)),
            &CancellationToken::new(),
        )
        .await
        .expect("timed run");
    assert!(timed.timed_out);
    assert_eq!(timed.exit_code, 124);
    assert_eq!(timed.output, "started\n\n[Command timed out after 1s]");
    {
        let state = fake.state();
        assert_eq!(
            state.kills, state.wrappers,
            "the kill names the command's token"
        );
    }

    let cancel = CancellationToken::new();
    let slow = exec("hang", Duration::from_secs(600));
    let running = backend.run(&slow, &cancel);
    tokio::pin!(running);
    // Interrupt once the command is in the container.
    let interrupted = loop {
        tokio::select! {
            done = &mut running => break done.expect("interrupted run"),
            () = tokio::time::sleep(Duration::from_millis(20)) => {
                if fake.state().wrappers.len() == 2 {
                    cancel.cancel();
                }
            }
        }
    };
    assert!(interrupted.interrupted);
    assert_eq!(interrupted.exit_code, 130);
    assert_eq!(interrupted.output, "\n[Command interrupted]");
    let state = fake.state();
    assert_eq!(state.kills.len(), 2);
    assert_eq!(state.kills, state.wrappers);
}

#[tokio::test]
async fn a_container_that_dies_is_gone_and_the_next_call_gets_a_fresh_one() {
    let fake = FakeDocker::start().await;
    let home = tempfile::tempdir().expect("home");
    let factory: Arc<dyn BackendFactory> = Arc::new(factory_with(&settings(&fake), home.path()));
    let sandboxes = Sandboxes::new(factory, Duration::from_secs(300));
    let scope = chat("-7");
    let backend = sandboxes.get(&scope).await.expect("open");
    let (first, _) = only_container(&fake);
    let error = backend
        .run(
            &exec("echo filling; oom", Duration::from_secs(30)),
            &CancellationToken::new(),
        )
        .await
        .expect_err("the container died");
    let BackendError::Gone { detail, .. } = &error else {
        panic!("expected gone, got {error}");
    };
    assert!(
        detail.contains("exited (exit 137, killed for using too much memory)"),
        "{detail}"
    );
    sandboxes.discard(&scope, &backend).await;
    assert!(
        fake.state().containers.is_empty(),
        "the dead container is removed"
    );

    let fresh = sandboxes.get(&scope).await.expect("fresh");
    let (second, _) = only_container(&fake);
    assert_ne!(first, second);
    let done = fresh
        .run(
            &exec("echo back", Duration::from_secs(30)),
            &CancellationToken::new(),
        )
        .await
        .expect("run in the fresh container");
    assert_eq!(done.output, "back\n");

    // Removed behind the backend's back: the engine's 404 is "gone" too.
    assert!(fake.state().remove_container(&second));
    let error = fresh
        .run(
            &exec("echo x", Duration::from_secs(30)),
            &CancellationToken::new(),
        )
        .await
        .expect_err("removed");
    assert!(error.is_gone(), "{error}");
    assert!(error.to_string().contains("was removed"), "{error}");
    assert!(
        fresh
            .read_file("/etc/x")
            .await
            .expect_err("removed")
            .is_gone()
    );
}

#[tokio::test]
async fn an_engine_error_is_not_mistaken_for_a_gone_container() {
    let fake = FakeDocker::start().await;
    let home = tempfile::tempdir().expect("home");
    let backend = factory_with(&settings(&fake), home.path())
        .open(&Scope::Shared)
        .await
        .expect("open");
    fake.state().fail_next_exec_create = Some(500);
    let error = backend
        .run(
            &exec("echo x", Duration::from_secs(30)),
            &CancellationToken::new(),
        )
        .await
        .expect_err("500");
    assert!(!error.is_gone(), "{error}");
    assert!(error.to_string().contains("500"), "{error}");
    let done = backend
        .run(
            &exec("echo fine", Duration::from_secs(30)),
            &CancellationToken::new(),
        )
        .await
        .expect("next call works");
    assert_eq!(done.output, "fine\n");
}

#[tokio::test]
async fn files_round_trip_byte_for_byte_relative_to_the_home() {
    let fake = FakeDocker::start().await;
    let home = tempfile::tempdir().expect("home");
    let backend = factory_with(&settings(&fake), home.path())
        .open(&Scope::Shared)
        .await
        .expect("open");
    let data: Vec<u8> = (0..=255u8).cycle().take(200_000).collect();
    backend
        .write_file("/work/a/b.bin", &data)
        .await
        .expect("write");
    assert_eq!(
        backend.read_file("/work/a/b.bin").await.expect("read"),
        Some(data)
    );
    backend
        .write_file("notes.md", b"# hi\n")
        .await
        .expect("write relative");
    let (id, _) = only_container(&fake);
    assert_eq!(
        fake.state().containers[&id].files.get("/root/notes.md"),
        Some(&b"# hi\n".to_vec())
    );
    assert!(
        backend
            .read_file("missing.txt")
            .await
            .expect("read")
            .is_none()
    );
    let err = backend.read_file("/work/a").await.expect_err("a directory");
    assert!(err.to_string().contains("not a regular file"), "{err}");
}

#[tokio::test]
async fn a_missing_image_is_pulled_a_leftover_replaced_and_an_unsupported_disk_limit_dropped() {
    let fake = FakeDocker::start().await;
    let home = tempfile::tempdir().expect("home");
    let mut wanted = settings(&fake);
    wanted.image = "example/other:2".to_owned();
    {
        let mut state = fake.state();
        state.storage_opt_unsupported = true;
    }
    let factory = factory_with(&wanted, home.path());
    let first = factory.open(&Scope::Shared).await.expect("open");
    let requests = fake.state().requests.clone();
    assert!(
        requests.iter().any(|r| r == "POST /images/create"),
        "{requests:?}"
    );
    let (_, body) = only_container(&fake);
    assert!(body["HostConfig"]["StorageOpt"].is_null(), "{body}");
    drop(first);
    // The same scope again (a daemon restarted without a sweep): the old one is replaced.
    factory.open(&Scope::Shared).await.expect("reopen");
    assert_eq!(fake.state().containers.len(), 1);
    assert!(
        fake.state()
            .requests
            .iter()
            .any(|r| r.starts_with("DELETE /containers/"))
    );
}

#[tokio::test]
async fn the_sweep_removes_only_this_homes_containers_and_shutdown_removes_its_own() {
    let fake = FakeDocker::start().await;
    let home = tempfile::tempdir().expect("home");
    let other_home = tempfile::tempdir().expect("other home");
    let ours = factory_with(&settings(&fake), home.path());
    let theirs = factory_with(&settings(&fake), other_home.path());
    let _left = ours.open(&chat("1")).await.expect("ours 1");
    let _left2 = ours.open(&chat("2")).await.expect("ours 2");
    let kept = theirs.open(&chat("1")).await.expect("theirs");
    let restarted = factory_with(&settings(&fake), home.path());
    assert_eq!(restarted.sweep().await.expect("sweep"), 2);
    assert_eq!(fake.state().containers.len(), 1);

    kept.shutdown().await;
    assert!(fake.state().containers.is_empty());
    let requests = fake.state().requests.clone();
    assert!(
        requests.iter().any(|r| r.ends_with("/stop")),
        "{requests:?}"
    );
    let error = kept
        .run(
            &exec("echo x", Duration::from_secs(5)),
            &CancellationToken::new(),
        )
        .await
        .expect_err("after shutdown");
    assert!(error.is_gone(), "{error}");
}

#[tokio::test]
async fn the_probe_names_the_engine_or_the_missing_socket() {
    let fake = FakeDocker::start().await;
    let home = tempfile::tempdir().expect("home");
    let line = factory_with(&settings(&fake), home.path())
        .probe()
        .await
        .expect("probe");
    assert!(line.contains("Fake Engine"), "{line}");
    assert!(line.contains(&fake.host()), "{line}");
    let missing = DockerSettings {
        host: Some(format!("unix://{}/none.sock", home.path().display())),
        ..settings(&fake)
    };
    let factory = factory_with(&missing, home.path());
    let error = factory.probe().await.expect_err("no engine");
    assert!(matches!(error, BackendError::Unavailable { .. }), "{error}");
    assert!(error.to_string().contains("none.sock"), "{error}");
    let error = factory.open(&Scope::Shared).await.expect_err("no engine");
    assert!(!error.is_gone(), "{error}");
}

#[tokio::test]
async fn bad_settings_are_refused_before_any_container_exists() {
    let fake = FakeDocker::start().await;
    let home = tempfile::tempdir().expect("home");
    let bad = DockerSettings {
        volumes: vec!["data-only".to_owned()],
        ..settings(&fake)
    };
    let err = DockerFactory::new(&bad, &TerminalConfig::default(), home.path())
        .expect_err("malformed volume");
    assert!(
        err.contains("docker_volumes") && err.contains("data-only"),
        "{err}"
    );
    let ssh = DockerSettings {
        host: Some("ssh://admin@box".to_owned()),
        ..settings(&fake)
    };
    let err =
        DockerFactory::new(&ssh, &TerminalConfig::default(), home.path()).expect_err("ssh host");
    assert!(err.contains("DOCKER_HOST"), "{err}");
    assert!(fake.state().requests.is_empty());
}

#[tokio::test]
async fn a_dropped_call_still_kills_its_command() {
    let fake = FakeDocker::start().await;
    let home = tempfile::tempdir().expect("home");
    let backend = factory_with(&settings(&fake), home.path())
        .open(&Scope::Shared)
        .await
        .expect("open");
    let never = CancellationToken::new();
    let slow = exec("hang", Duration::from_secs(600));
    {
        let running = backend.run(&slow, &never);
        tokio::pin!(running);
        // Drop the call once its command is in the container (the turn was abandoned).
        loop {
            tokio::select! {
                done = &mut running => panic!("the command cannot end: {done:?}"),
                () = tokio::time::sleep(Duration::from_millis(20)) => {
                    if !fake.state().wrappers.is_empty() {
                        break;
                    }
                }
            }
        }
    }
    let start = std::time::Instant::now();
    while fake.state().kills.is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no kill after the drop"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let state = fake.state();
    assert_eq!(state.kills, state.wrappers);
}

#[tokio::test]
async fn output_is_bounded_and_host_user_mode_keeps_fewer_capabilities() {
    let fake = FakeDocker::start().await;
    let home = tempfile::tempdir().expect("home");
    let as_host = DockerSettings {
        run_as_host_user: true,
        ..settings(&fake)
    };
    let backend = factory_with(&as_host, home.path())
        .open(&Scope::Shared)
        .await
        .expect("open");
    let (_, body) = only_container(&fake);
    assert_eq!(
        body["HostConfig"]["CapAdd"],
        serde_json::json!(["DAC_OVERRIDE", "CHOWN", "FOWNER"])
    );
    let user = body["User"].as_str().expect("user");
    let (uid, gid) = user.split_once(':').expect("uid:gid");
    assert!(
        uid.parse::<u32>().is_ok() && gid.parse::<u32>().is_ok(),
        "{user}"
    );

    let long = "x".repeat(500);
    let mut small = exec(
        &format!("echo {long}; echo tail-end"),
        Duration::from_secs(30),
    );
    small.max_chars = 200;
    let done = backend
        .run(&small, &CancellationToken::new())
        .await
        .expect("run");
    assert!(done.output.chars().count() <= 200, "{}", done.output);
    assert!(done.output.contains("output cut"), "{}", done.output);
    assert!(done.output.ends_with("tail-end\n"), "{}", done.output);
}
