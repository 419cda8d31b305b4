//! Stand-ins for the gateway core on the other end of an [`AdapterContext`]: one that answers
//! the way the real core does (and can be told to fail or stall), one that lets the test
//! answer every hand-over itself.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::WAIT;
use crate::{
    AdapterContext, DeadLetter, DeadLetterInbound, Inbound, Ingress, MessageEvent, Progress,
    RecordOutcome,
};

/// A core that records every event it is handed, answers `Duplicate` for an event id it
/// already recorded (as the real journal does), keeps every dead letter, and can be scripted
/// to answer otherwise (a storage failure) or to stop answering for a while (a slow core).
#[derive(Debug)]
pub struct TestCore {
    /// The context to run an adapter with; [`TestCore::context`] gives one with its own
    /// shutdown token, for a second run against the same core (a restart).
    pub ctx: AdapterContext,
    events: mpsc::UnboundedReceiver<(MessageEvent, RecordOutcome)>,
    dead_letters: mpsc::UnboundedReceiver<DeadLetter>,
    script: Arc<Mutex<VecDeque<RecordOutcome>>>,
    deliveries: Arc<Mutex<Vec<String>>>,
    paused: watch::Sender<bool>,
}

impl Default for TestCore {
    fn default() -> Self {
        Self::new()
    }
}

impl TestCore {
    pub fn new() -> Self {
        Self::with_journal::<String>(&[])
    }

    /// A core whose journal already holds `event_ids`, as left by an earlier process that
    /// died before the adapter acknowledged them to the platform.
    pub fn with_journal<T: ToString>(event_ids: &[T]) -> Self {
        let mut recorded: HashSet<String> = event_ids.iter().map(ToString::to_string).collect();
        let (inbound_tx, mut inbound_rx) = mpsc::channel::<Inbound>(64);
        let (events_tx, events) = mpsc::unbounded_channel();
        let script: Arc<Mutex<VecDeque<RecordOutcome>>> = Arc::default();
        let deliveries: Arc<Mutex<Vec<String>>> = Arc::default();
        let (paused, mut pause) = watch::channel(false);
        let (answers, log) = (script.clone(), deliveries.clone());
        tokio::spawn(async move {
            while let Some(Inbound {
                event,
                recorded: answer,
            }) = inbound_rx.recv().await
            {
                // A paused core holds the answer back; the sender is kept by the core, so
                // the wait ends when the test resumes it.
                let _ = pause.wait_for(|paused| !*paused).await;
                log.lock().unwrap().push(event.event_id.clone());
                let scripted = answers.lock().unwrap().pop_front();
                let outcome = match scripted {
                    Some(outcome) => outcome,
                    None if recorded.contains(&event.event_id) => RecordOutcome::Duplicate,
                    None => RecordOutcome::Recorded,
                };
                if outcome == RecordOutcome::Recorded {
                    recorded.insert(event.event_id.clone());
                }
                let _ = events_tx.send((event, outcome));
                let _ = answer.send(outcome);
            }
        });
        let (letters_tx, mut letters_rx) = mpsc::channel::<DeadLetterInbound>(16);
        let (kept_tx, dead_letters) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Some(DeadLetterInbound { letter, recorded }) = letters_rx.recv().await {
                let _ = kept_tx.send(letter);
                let _ = recorded.send(RecordOutcome::Recorded);
            }
        });
        let ctx = AdapterContext {
            inbound: inbound_tx,
            dead_letters: letters_tx,
            progress: Progress::new(),
            shutdown: CancellationToken::new(),
            ingress: Ingress::solo(),
        };
        Self {
            ctx,
            events,
            dead_letters,
            script,
            deliveries,
            paused,
        }
    }

    /// A context on this core with a shutdown token of its own, so one adapter run can be
    /// stopped and the next (a restarted process) served by the same core.
    pub fn context(&self) -> AdapterContext {
        AdapterContext {
            shutdown: CancellationToken::new(),
            ..self.ctx.clone()
        }
    }

    /// The next `n` hand-overs are answered `outcome`, then recording and deduping resume.
    pub fn answer_next(&self, outcome: RecordOutcome, n: usize) {
        self.script
            .lock()
            .unwrap()
            .extend(std::iter::repeat_n(outcome, n));
    }

    /// While paused the core takes hand-overs but answers none (a slow database).
    pub fn pause(&self, paused: bool) {
        self.paused.send_replace(paused);
    }

    /// The next hand-over with the answer it got (duplicates and failures included).
    pub async fn next(&mut self) -> (MessageEvent, RecordOutcome) {
        tokio::time::timeout(WAIT, self.events.recv())
            .await
            .expect("an event within the wait")
            .expect("the core's channel is open")
    }

    /// The next event handed over, whatever its answer.
    pub async fn next_event(&mut self) -> MessageEvent {
        self.next().await.0
    }

    /// The next event that was newly recorded (duplicates and failed hand-overs skipped).
    pub async fn next_recorded(&mut self) -> MessageEvent {
        loop {
            let (event, outcome) = self.next().await;
            if outcome == RecordOutcome::Recorded {
                return event;
            }
        }
    }

    /// The next dead letter (each is answered `Recorded`).
    pub async fn next_dead_letter(&mut self) -> DeadLetter {
        tokio::time::timeout(WAIT, self.dead_letters.recv())
            .await
            .expect("a dead letter within the wait")
            .expect("the core's channel is open")
    }

    /// Events already handed over, without waiting.
    pub fn drain(&mut self) -> Vec<MessageEvent> {
        std::iter::from_fn(|| self.events.try_recv().ok().map(|(event, _)| event)).collect()
    }

    /// Every event id handed over, in order, duplicates and failures included.
    pub fn deliveries(&self) -> Vec<String> {
        self.deliveries.lock().unwrap().clone()
    }

    /// How many times `event_id` was handed over.
    pub fn deliveries_of(&self, event_id: &str) -> usize {
        self.deliveries
            .lock()
            .unwrap()
            .iter()
            .filter(|id| *id == event_id)
            .count()
    }
}

/// A core that answers nothing by itself: the test takes each hand-over and answers it, to
/// look at the platform in between (was anything acknowledged before the answer?).
#[derive(Debug)]
pub struct ManualCore {
    pub ctx: AdapterContext,
    pub inbound: mpsc::Receiver<Inbound>,
    pub dead_letters: mpsc::Receiver<DeadLetterInbound>,
}

impl Default for ManualCore {
    fn default() -> Self {
        Self::new()
    }
}

impl ManualCore {
    pub fn new() -> Self {
        let (inbound_tx, inbound) = mpsc::channel(64);
        let (letters_tx, dead_letters) = mpsc::channel(16);
        let ctx = AdapterContext {
            inbound: inbound_tx,
            dead_letters: letters_tx,
            progress: Progress::new(),
            shutdown: CancellationToken::new(),
            ingress: Ingress::solo(),
        };
        Self {
            ctx,
            inbound,
            dead_letters,
        }
    }

    /// The next event handed over, not answered yet.
    pub async fn next(&mut self) -> Inbound {
        tokio::time::timeout(WAIT, self.inbound.recv())
            .await
            .expect("an event within the wait")
            .expect("the core's channel is open")
    }

    /// The next dead letter handed over, not answered yet.
    pub async fn next_dead_letter(&mut self) -> DeadLetterInbound {
        tokio::time::timeout(WAIT, self.dead_letters.recv())
            .await
            .expect("a dead letter within the wait")
            .expect("the core's channel is open")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SessionSource;

    fn event(id: &str) -> MessageEvent {
        MessageEvent::text(id, SessionSource::dm("test", "1", "1"), "hi")
    }

    #[tokio::test]
    async fn the_test_core_dedupes_like_the_journal_and_follows_its_script() {
        let mut core = TestCore::with_journal(&[7]);
        assert_eq!(core.ctx.deliver(event("7")).await, RecordOutcome::Duplicate);
        core.answer_next(RecordOutcome::Failed, 1);
        assert_eq!(core.ctx.deliver(event("8")).await, RecordOutcome::Failed);
        assert_eq!(core.ctx.deliver(event("8")).await, RecordOutcome::Recorded);
        assert_eq!(core.ctx.deliver(event("8")).await, RecordOutcome::Duplicate);
        assert_eq!(core.next_recorded().await.event_id, "8");
        assert_eq!(core.deliveries(), ["7", "8", "8", "8"]);
        assert_eq!(core.deliveries_of("8"), 3);
    }
}
