//! Discord shards across instances through the real binary (issue 22): two `hermesd run`
//! instances on one PostgreSQL database, a bot with `discord.extra.shard_count: 2` on the
//! fake Discord (guild events on the connection of shard `(guild_id >> 22) % 2`). The shards
//! spread one per instance; a message in a guild of each shard is answered exactly once;
//! kill -9 of one instance → its shard is taken over within the lease time and a later
//! message in that guild is answered. A process that shares the database without running
//! the adapter (as `hermesd chat` does) does not count when shards are shared out.

#[path = "discord_rig/mod.rs"]
mod discord_rig;
mod support;

use std::time::{Duration, Instant};

use discord_rig::Rig;
use hermesd::state::{Store, StoreOptions};
use serde_json::json;
use support::conditions::wait_until;
use support::daemon::Daemon;
use support::postgres::PgCluster;

const WAIT: Duration = Duration::from_secs(60);

fn identified(rig: &Rig, shard: u64) -> usize {
    rig.fake
        .frames_with_op(2)
        .iter()
        .filter(|frame| frame.d["shard"] == json!([shard, 2]))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_share_two_shards_and_a_killed_ones_shard_is_taken_over() {
    let cluster = PgCluster::start();
    let mut rig = Rig::new(Duration::from_secs(30)).await;
    let guilds = [
        rig.fake.add_guild_in_shard("first", 0, 2),
        rig.fake.add_guild_in_shard("second", 1, 2),
    ];
    let channels = [
        rig.fake.add_text_channel_in(&guilds[0], "general"),
        rig.fake.add_text_channel_in(&guilds[1], "general"),
    ];
    rig.add_extra("shard_count", "2");
    rig.add_extra("require_mention", "false");
    rig.add_extra("auto_thread", "false");
    rig.append_config(&format!(
        "state:\n  backend: postgres\n  postgres_url: \"{}\"\n  lease_seconds: 3\n  instance_id: a\n",
        cluster.url()
    ));
    rig.launch().await;
    // The second instance: the same configuration in a home of its own.
    let home_b = tempfile::tempdir().unwrap();
    let config = std::fs::read_to_string(rig.home.path().join("config.yaml")).unwrap();
    std::fs::write(
        home_b.path().join("config.yaml"),
        config.replace("instance_id: a", "instance_id: b"),
    )
    .unwrap();
    let env_b: Vec<(String, String)> = rig
        .env
        .iter()
        .map(|(k, v)| {
            let home_a = rig.home.path().display().to_string();
            let v = v.replace(&home_a, &home_b.path().display().to_string());
            (k.clone(), v)
        })
        .collect();
    let b = tokio::task::block_in_place(|| Daemon::start(home_b.path(), &env_b));

    let start = Instant::now();
    loop {
        let (held_a, held_b) = (
            rig.daemon.as_ref().unwrap().discord_shards(),
            b.discord_shards(),
        );
        if held_a.len() == 1 && held_b.len() == 1 && held_a != held_b {
            break;
        }
        let shard_lines = |daemon: &Daemon| -> Vec<String> {
            daemon
                .logs()
                .into_iter()
                .filter(|l| l.contains("shard") || l.contains("ingress"))
                .collect()
        };
        assert!(
            start.elapsed() < WAIT,
            "the shards never spread one per instance: a {:#?}, b {:#?}",
            shard_lines(rig.daemon.as_ref().unwrap()),
            shard_lines(&b)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    wait_until("both shards are identified", WAIT, || {
        identified(&rig, 0) >= 1 && identified(&rig, 1) >= 1
    })
    .await;

    let owner = rig.owner.clone();
    for (n, channel) in channels.iter().enumerate() {
        rig.say(channel, &owner, &format!("hello {n}"));
    }
    for channel in &channels {
        rig.wait_texts(channel, 1).await;
    }

    // Kill -9 the instance running shard 1; the other takes it over.
    let shard_of_a = rig.daemon.as_ref().unwrap().discord_shards()[0];
    let before = identified(&rig, 1);
    let killed = Instant::now();
    let survivor = if shard_of_a == 1 {
        let a = rig.daemon.take().unwrap();
        tokio::task::block_in_place(|| a.kill9());
        b
    } else {
        tokio::task::block_in_place(|| b.kill9());
        rig.daemon.take().unwrap()
    };
    wait_until("the survivor identifies shard 1", WAIT, || {
        identified(&rig, 1) > before && survivor.discord_shards().len() == 2
    })
    .await;
    println!(
        "shard 1 taken over {:?} after kill -9 (lease time 3s)",
        killed.elapsed()
    );
    rig.say(&channels[1], &owner, "after the takeover");
    rig.wait_texts(&channels[1], 2).await;
    // Exactly one answer per message.
    assert_eq!(
        rig.texts_in(&channels[0]).len(),
        1,
        "{:?}",
        rig.texts_in(&channels[0])
    );
    assert_eq!(
        rig.texts_in(&channels[1]).len(),
        2,
        "{:?}",
        rig.texts_in(&channels[1])
    );
    drop(survivor);
}

/// Issue 28, defect 7: the fair share divided the shards by every instance lease on the
/// database, `hermesd chat` included, so one daemon next to one chat process ran one shard
/// of two and the other had no owner. Only the daemons running the Discord adapter count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_without_the_adapter_leaves_no_shard_unowned() {
    let cluster = PgCluster::start();
    // Shares the database and holds an instance lease, as `hermesd chat` does; it runs no
    // adapter.
    let chat = Store::open_postgres(
        &cluster.url(),
        StoreOptions {
            instance_id: Some("chat".into()),
            lease_ttl: Duration::from_secs(3),
            ..StoreOptions::default()
        },
    )
    .await
    .expect("open the chat process's store");
    let mut rig = Rig::new(Duration::from_secs(30)).await;
    let guilds = [
        rig.fake.add_guild_in_shard("first", 0, 2),
        rig.fake.add_guild_in_shard("second", 1, 2),
    ];
    let channels = [
        rig.fake.add_text_channel_in(&guilds[0], "general"),
        rig.fake.add_text_channel_in(&guilds[1], "general"),
    ];
    rig.add_extra("shard_count", "2");
    rig.add_extra("require_mention", "false");
    rig.add_extra("auto_thread", "false");
    rig.append_config(&format!(
        "state:\n  backend: postgres\n  postgres_url: \"{}\"\n  lease_seconds: 3\n  instance_id: a\n",
        cluster.url()
    ));
    rig.launch().await;
    wait_until("the one daemon runs both shards", WAIT, || {
        identified(&rig, 0) >= 1
            && identified(&rig, 1) >= 1
            && rig.daemon.as_ref().unwrap().discord_shards().len() == 2
    })
    .await;
    let owner = rig.owner.clone();
    for (n, channel) in channels.iter().enumerate() {
        rig.say(channel, &owner, &format!("hello {n}"));
    }
    for channel in &channels {
        rig.wait_texts(channel, 1).await;
    }
    chat.close().await;
}

/// A shard count that is not a positive whole number stops the daemon before it starts,
/// with exit code 78 and the key named.
#[test]
fn a_bad_shard_count_exits_78_naming_the_key() {
    for bad in ["0", "-2", "1.5", "many"] {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(
            home.path().join("config.yaml"),
            format!("discord:\n  enabled: true\n  extra:\n    shard_count: {bad}\n"),
        )
        .unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_hermesd"))
            .arg("run")
            .env_clear()
            .env("HOME", home.path().join("user"))
            .env("HERMES_HOME", home.path())
            .env("HERMES_TEST_ISOLATION", "1")
            .env("API_SERVER_PORT", "0")
            .env("HERMES__ADMIN__PORT", "0")
            .env("DISCORD_BOT_TOKEN", "a-token")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(78), "{bad}: {err}");
        assert!(err.contains("discord.extra.shard_count"), "{bad}: {err}");
    }
}
