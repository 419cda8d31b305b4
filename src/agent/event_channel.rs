//! The bounded channel a turn's events travel on. A display (a chat's preview, an SSE
//! client) can be slower than the model: instead of queueing every event behind it, text
//! deltas are coalesced into the delta already waiting, and when `DISPLAY_CAP` events wait,
//! the oldest display-only one (thinking, tool progress, status) is dropped. Deltas and
//! stream restarts are never dropped, and the final reply never travels here (it is the
//! turn's return value), so pressure costs only progress lines.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use super::events::AgentEvent;

/// Events waiting at most (deltas coalesce, so this bounds everything but the text).
pub const DISPLAY_CAP: usize = 64;

#[derive(Debug, Default)]
struct Waiting {
    events: VecDeque<AgentEvent>,
    senders: usize,
    receiver_gone: bool,
    dropped: u64,
}

#[derive(Debug, Default)]
struct Shared {
    waiting: Mutex<Waiting>,
    ready: Notify,
    /// Touched by every event sent, shown or not (the turn budget's clock).
    activity: super::Activity,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Waiting> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A new channel: the sink for the agent, the stream for one display.
pub fn event_channel() -> (EventSink, EventStream) {
    let shared = Arc::new(Shared::default());
    shared.lock().senders = 1;
    (
        EventSink {
            shared: shared.clone(),
        },
        EventStream { shared },
    )
}

/// Sends `event` where a turn's events go. A closed receiver is fine: events are
/// informational.
pub(crate) fn emit(sink: &EventSink, event: AgentEvent) {
    let _ = sink.send(event);
}

/// The sending side (where a turn's events go); clone it freely.
#[derive(Debug)]
pub struct EventSink {
    shared: Arc<Shared>,
}

/// The receiver is gone; the event was not kept.
#[derive(Debug, Clone, PartialEq)]
pub struct Closed;

impl EventSink {
    /// The clock every event sent on this channel touches.
    pub fn activity(&self) -> super::Activity {
        self.shared.activity.clone()
    }

    /// Queues `event` (see the module docs for what pressure does); never waits.
    pub fn send(&self, event: AgentEvent) -> Result<(), Closed> {
        match &event {
            AgentEvent::ToolStarted { .. } => self.shared.activity.tool(true),
            AgentEvent::ToolFinished { .. } => self.shared.activity.tool(false),
            _ => self.shared.activity.touch(),
        }
        let mut waiting = self.shared.lock();
        if waiting.receiver_gone {
            return Err(Closed);
        }
        match event {
            AgentEvent::Delta(text) => {
                if let Some(AgentEvent::Delta(last)) = waiting.events.back_mut() {
                    last.push_str(&text);
                } else {
                    waiting.events.push_back(AgentEvent::Delta(text));
                }
            }
            AgentEvent::StreamRestart => {
                // What waits unshown is void anyway.
                waiting
                    .events
                    .retain(|e| !matches!(e, AgentEvent::Delta(_) | AgentEvent::Reasoning(_)));
                waiting.events.push_back(AgentEvent::StreamRestart);
            }
            other => waiting.events.push_back(other),
        }
        while waiting.events.len() > DISPLAY_CAP {
            let Some(index) = waiting.events.iter().position(display_only) else {
                break;
            };
            waiting.events.remove(index);
            waiting.dropped += 1;
        }
        drop(waiting);
        self.shared.ready.notify_one();
        Ok(())
    }
}

/// Events a display may lose under pressure.
fn display_only(event: &AgentEvent) -> bool {
    !matches!(event, AgentEvent::Delta(_) | AgentEvent::StreamRestart)
}

impl Clone for EventSink {
    fn clone(&self) -> Self {
        self.shared.lock().senders += 1;
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl Drop for EventSink {
    fn drop(&mut self) {
        self.shared.lock().senders -= 1;
        self.shared.ready.notify_one();
    }
}

/// The receiving side.
#[derive(Debug)]
pub struct EventStream {
    shared: Arc<Shared>,
}

impl EventStream {
    /// The next event; `None` once every sink is gone and nothing waits.
    pub async fn recv(&mut self) -> Option<AgentEvent> {
        loop {
            {
                let mut waiting = self.shared.lock();
                if let Some(event) = waiting.events.pop_front() {
                    return Some(event);
                }
                if waiting.senders == 0 {
                    return None;
                }
            }
            // `notify_one` keeps a permit when nobody waits, so no wake-up is lost here.
            self.shared.ready.notified().await;
        }
    }

    /// Display-only events dropped under pressure so far.
    pub fn dropped(&self) -> u64 {
        self.shared.lock().dropped
    }
}

impl Drop for EventStream {
    fn drop(&mut self) {
        let mut waiting = self.shared.lock();
        waiting.receiver_gone = true;
        waiting.events.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(i: usize) -> AgentEvent {
        AgentEvent::Status(format!("s{i}"))
    }

    #[tokio::test]
    async fn a_slow_display_gets_coalesced_text_and_loses_only_progress() {
        let (sink, mut stream) = event_channel();
        for i in 0..10_000 {
            sink.send(status(i)).unwrap();
            sink.send(AgentEvent::Delta(format!("{} ", i % 10)))
                .unwrap();
        }
        let waiting = stream.shared.lock().events.len();
        assert!(waiting <= DISPLAY_CAP + 1, "{waiting} events held");
        drop(sink);
        let mut text = String::new();
        let mut statuses = 0;
        while let Some(event) = stream.recv().await {
            match event {
                AgentEvent::Delta(delta) => text.push_str(&delta),
                AgentEvent::Status(_) => statuses += 1,
                other => panic!("unexpected {other:?}"),
            }
        }
        let expected: String = (0..10_000).map(|i| format!("{} ", i % 10)).collect();
        assert_eq!(text, expected, "no text is lost");
        assert!(statuses <= DISPLAY_CAP, "{statuses}");
        assert_eq!(stream.dropped() as usize + statuses, 10_000);
    }

    #[tokio::test]
    async fn a_restart_voids_waiting_text_and_the_stream_ends_with_its_sinks() {
        let (sink, mut stream) = event_channel();
        let second = sink.clone();
        sink.send(AgentEvent::Delta("draft".into())).unwrap();
        second.send(AgentEvent::StreamRestart).unwrap();
        second.send(AgentEvent::Delta("final".into())).unwrap();
        drop(sink);
        assert_eq!(stream.recv().await, Some(AgentEvent::StreamRestart));
        assert_eq!(stream.recv().await, Some(AgentEvent::Delta("final".into())));
        let waiter = tokio::spawn(async move { stream.recv().await });
        drop(second);
        assert_eq!(waiter.await.unwrap(), None);
    }

    #[test]
    fn sending_to_a_gone_display_keeps_nothing() {
        let (sink, stream) = event_channel();
        drop(stream);
        assert_eq!(sink.send(AgentEvent::Delta("x".into())), Err(Closed));
    }
}
