//! Sharding (https://discord.com/developers/docs/events/gateway#sharding): with
//! `shard_count` N the adapter opens N connections identified `[0, N]` .. `[N-1, N]`, and the
//! events of a guild arrive on the connection of its shard; a shard pair Discord cannot
//! accept is refused with close code 4010.

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use fake_discord::{FakeDiscord, Incoming};
use hermes_adapter::Progress;
use hermes_discord::gateway::connection::{self, ConnectParams, ConnectionEnd};
use serde_json::json;
use support::{Harness, TOKEN, settings};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn each_shard_gets_its_own_connection_and_its_guilds_events() {
    let fake = FakeDiscord::start(TOKEN, Duration::from_secs(30)).await;
    let first = fake.add_guild_in_shard("first", 0, 2);
    let second = fake.add_guild_in_shard("second", 1, 2);
    let first_channel = fake.add_text_channel_in(&first, "general");
    let second_channel = fake.add_text_channel_in(&second, "general");
    let cache = tempfile::tempdir().unwrap();
    let settings = settings(
        &fake,
        json!({"shard_count": 2, "require_mention": false, "auto_thread": false}),
        &[],
        cache.path(),
    );
    let mut h = Harness::from_parts(fake, settings, cache);
    h.ready(2).await;
    let shards: BTreeSet<String> = h
        .fake
        .frames_with_op(2)
        .iter()
        .map(|frame| frame.d["shard"].to_string())
        .collect();
    assert_eq!(shards, BTreeSet::from(["[0,2]".into(), "[1,2]".into()]));

    let alice = h.fake.new_user("alice", false, &[]);
    h.fake
        .push_message(Incoming::new(&first_channel, &alice, "in the first guild"));
    h.fake.push_message(Incoming::new(
        &second_channel,
        &alice,
        "in the second guild",
    ));
    let mut texts = BTreeSet::new();
    for _ in 0..2 {
        texts.insert(h.next_event().await.text);
    }
    assert_eq!(
        texts,
        BTreeSet::from([
            "in the first guild".to_owned(),
            "in the second guild".to_owned()
        ])
    );
    h.stop().await.unwrap();
}

/// Identifies once with `shard` and returns how the connection ended.
async fn identify_as(fake: &FakeDiscord, shard: [u32; 2]) -> ConnectionEnd {
    let cache = tempfile::tempdir().unwrap();
    let settings = settings(fake, json!({}), &[], cache.path());
    let (dispatches, mut received) = mpsc::channel(16);
    let shutdown = CancellationToken::new();
    let progress = Progress::new();
    let url = fake.gateway_url();
    let mut resume = None;
    let run = connection::run(
        ConnectParams {
            url: &url,
            net: &settings.net,
            token: &settings.token,
            timeout: settings.http_timeout,
            progress: &progress,
            shutdown: &shutdown,
            dispatches: &dispatches,
            shard,
        },
        &mut resume,
    );
    let stop_on_ready = async {
        while let Some(dispatch) = received.recv().await {
            if dispatch.name == "READY" {
                assert_eq!(dispatch.data["shard"], json!(shard));
                shutdown.cancel();
            }
        }
        std::future::pending::<()>().await
    };
    let outcome = tokio::time::timeout(support::WAIT, async {
        tokio::select! {
            outcome = run => outcome,
            () = stop_on_ready => unreachable!(),
        }
    })
    .await
    .expect("the connection ends");
    outcome.end
}

#[tokio::test]
async fn a_shard_outside_the_count_is_refused_with_4010() {
    let fake = FakeDiscord::start(TOKEN, Duration::from_secs(30)).await;
    assert_eq!(
        identify_as(&fake, [2, 2]).await,
        ConnectionEnd::Closed { code: Some(4010) }
    );
    assert_eq!(
        identify_as(&fake, [0, 0]).await,
        ConnectionEnd::Closed { code: Some(4010) }
    );
    assert_eq!(identify_as(&fake, [1, 2]).await, ConnectionEnd::Shutdown);
}
