//! Envelopes handled concurrently, in arrival order within a lane: Slack wants every
//! envelope acknowledged within 3 seconds
//! (<https://api.slack.com/apis/socket-mode#acknowledge>), so a slow file download in one
//! channel must not hold up the envelopes of another, while two messages of one channel
//! (or a message and its `app_mention` twin, or a redelivery of a message still being
//! handled) must still be handed to the core in the order Slack sent them.
//!
//! A lane is named by [`lane_of`]: the channel for events, the prompt for button clicks,
//! the channel for slash commands — the last two never wait behind an event's download.
//! Each job waits for the previous job of its lane and nothing else.

use std::collections::HashMap;
use std::future::Future;

use serde_json::Value;
use tokio::sync::oneshot;
use tokio::task::JoinSet;

/// Past this many remembered lanes, the finished ones are forgotten.
const LANES_KEPT: usize = 1024;

/// The running jobs; dropping it aborts them (an aborted job acks nothing, so Slack
/// redelivers its envelope to the next connection).
#[derive(Default)]
pub struct Lanes {
    /// Per lane, the signal that its newest job finished.
    tails: HashMap<String, oneshot::Receiver<()>>,
    jobs: JoinSet<()>,
}

impl Lanes {
    /// Runs `job` once every job queued earlier on `lane` has finished.
    pub fn spawn(&mut self, lane: String, job: impl Future<Output = ()> + Send + 'static) {
        while self.jobs.try_join_next().is_some() {}
        if self.tails.len() >= LANES_KEPT {
            self.tails.retain(|_, done| {
                matches!(done.try_recv(), Err(oneshot::error::TryRecvError::Empty))
            });
        }
        let (finished, done) = oneshot::channel::<()>();
        let previous = self.tails.insert(lane, done);
        self.jobs.spawn(async move {
            if let Some(previous) = previous {
                // Finished or aborted, the previous job no longer holds the lane.
                let _ = previous.await;
            }
            job.await;
            drop(finished);
        });
    }
}

fn str_at<'v>(value: &'v Value, pointer: &str) -> &'v str {
    value.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// The lane an envelope is handled in.
pub fn lane_of(kind: &str, payload: &Value) -> String {
    match kind {
        "events_api" => {
            let event = payload.get("event").unwrap_or(&Value::Null);
            let channel = ["/channel", "/assistant_thread/channel_id", "/item/channel"]
                .iter()
                .map(|p| str_at(event, p))
                .find(|c| !c.is_empty())
                .unwrap_or("");
            format!("event:{channel}")
        }
        // Two clicks on one prompt stay in order, so the second sees the first answered.
        "interactive" => format!(
            "click:{}:{}",
            str_at(payload, "/channel/id"),
            str_at(payload, "/container/message_ts")
        ),
        "slash_commands" => format!("slash:{}", str_at(payload, "/channel_id")),
        other => format!("other:{other}"),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use serde_json::json;

    use super::*;

    #[tokio::test]
    async fn a_slow_lane_holds_up_only_itself() {
        let mut lanes = Lanes::default();
        let order = Arc::new(Mutex::new(Vec::new()));
        let (release, held) = oneshot::channel::<()>();
        let (other_done, other_finished) = oneshot::channel::<()>();
        let log = order.clone();
        lanes.spawn("event:C1".into(), async move {
            let _ = held.await;
            log.lock().unwrap().push("C1 first");
        });
        let (second_done, second_finished) = oneshot::channel::<()>();
        let log = order.clone();
        lanes.spawn("event:C1".into(), async move {
            log.lock().unwrap().push("C1 second");
            let _ = second_done.send(());
        });
        let log = order.clone();
        lanes.spawn("event:C2".into(), async move {
            log.lock().unwrap().push("C2");
            let _ = other_done.send(());
        });
        tokio::time::timeout(Duration::from_secs(30), other_finished)
            .await
            .expect("the other lane ran while the first was held")
            .unwrap();
        assert_eq!(*order.lock().unwrap(), ["C2"]);
        release.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(30), second_finished)
            .await
            .expect("lane C1 ran once released")
            .unwrap();
        assert_eq!(*order.lock().unwrap(), ["C2", "C1 first", "C1 second"]);
    }

    #[test]
    fn lanes_by_kind() {
        let event = json!({"event": {"type": "message", "channel": "C1"}});
        assert_eq!(lane_of("events_api", &event), "event:C1");
        let started = json!({"event": {"type": "assistant_thread_started",
            "assistant_thread": {"channel_id": "D1", "thread_ts": "1.0"}}});
        assert_eq!(lane_of("events_api", &started), "event:D1");
        let click = json!({"channel": {"id": "C1"}, "container": {"message_ts": "2.0"}});
        assert_eq!(lane_of("interactive", &click), "click:C1:2.0");
        let slash = json!({"channel_id": "C1"});
        assert_eq!(lane_of("slash_commands", &slash), "slash:C1");
    }
}
