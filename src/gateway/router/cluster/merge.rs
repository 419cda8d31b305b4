//! On PostgreSQL, the parts of one Telegram album or split paste become one turn wherever
//! each part was received. Every part is journaled with a [`MergeTag`]; before the session's
//! holder runs a tagged event, it waits until no part has turned up for the tag's quiet
//! period (timed by this holder's own clock, from when it first saw each part: never another
//! host's), then folds the parts into the oldest row in one transaction: that row carries
//! the joined event and the others are answered. The turn answers the one row, so the user
//! gets one reply. A part that turns up after its group's turn started waits for a turn of
//! its own, as on one instance when a part comes later than the quiet period.
//!
//! Nothing an instance keeps decides what joins: only the journal's rows and their tags, so
//! it does not matter which instance received which part.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use hermes_adapter::{MergeKind, MergeTag, MessageEvent};
use tokio::time::Instant;

use crate::coord::with_fence;
use crate::gateway::cluster::Held;
use crate::gateway::router::cluster::{ClusterLink, seen_key};
use crate::gateway::router::slot::{Job, Slot};

/// How often the journal is read again while a group waits for its quiet period.
const LOOK_AGAIN_MAX: Duration = Duration::from_millis(200);
const LOOK_AGAIN_MIN: Duration = Duration::from_millis(20);

/// When this holder first saw each tagged event (by its `seen_key`), for this hold.
pub(in crate::gateway::router) type FirstSeen = HashMap<String, Instant>;

/// What the slot's front job needs before it runs.
#[derive(Debug, PartialEq, Eq)]
pub(in crate::gateway::router) enum Gather {
    /// Nothing to join: run it.
    Run,
    /// Its group may still grow: look at the journal again, no later than this.
    Wait(Instant),
    /// Join these queued jobs (their queue indexes, in the platform's order of the parts)
    /// into the front job, then run it.
    Join(Vec<usize>),
}

/// The tag of a job that may be joined: a journaled chat event not yet started.
fn tag_of(job: &Job) -> Option<&MergeTag> {
    if job.api.is_some() || job.resumed {
        return None;
    }
    job.event.merge.as_ref()
}

fn name_of(job: &Job) -> String {
    seen_key(&job.event.source.platform, &job.event.event_id)
}

fn quiet_of(tag: &MergeTag) -> Duration {
    Duration::from_millis(tag.quiet_ms)
}

/// Decides for the front of `queue` (see [`Gather`]); records in `first_seen` when each
/// part of its group was first seen (`now` for the ones new to it).
pub(in crate::gateway::router) fn plan(
    queue: &VecDeque<Job>,
    first_seen: &mut FirstSeen,
    now: Instant,
) -> Gather {
    let Some(front) = queue.front() else {
        return Gather::Run;
    };
    let Some(tag) = tag_of(front) else {
        return Gather::Run;
    };
    let platform = &front.event.source.platform;
    let mut parts: Vec<usize> = queue
        .iter()
        .enumerate()
        .filter(|(_, job)| {
            job.event.source.platform == *platform
                && tag_of(job).is_some_and(|t| t.key == tag.key && t.kind == tag.kind)
        })
        .map(|(i, _)| i)
        .collect();
    // In the platform's order; the journal's order breaks ties.
    parts.sort_by_key(|&i| (tag_of(&queue[i]).map_or(0, |t| t.order), i));
    if tag.kind == MergeKind::SplitText {
        parts = chain_through_front(queue, parts);
    }
    let mut newest: Option<Instant> = None;
    for &i in &parts {
        let seen = *first_seen.entry(name_of(&queue[i])).or_insert(now);
        newest = newest.max(Some(seen));
    }
    let newest = newest.unwrap_or(now);
    let last = parts.last().and_then(|&i| tag_of(&queue[i]));
    let until = newest + last.map_or(Duration::ZERO, quiet_of);
    if now < until {
        Gather::Wait(until)
    } else if parts.len() > 1 {
        Gather::Join(parts)
    } else {
        Gather::Run
    }
}

/// The parts of a split paste that belong with the front job: the run of `parts` (in the
/// platform's order) around it in which each part but the last may continue.
fn chain_through_front(queue: &VecDeque<Job>, parts: Vec<usize>) -> Vec<usize> {
    let continues = |i: usize| tag_of(&queue[i]).is_some_and(|t| t.quiet_ms > 0);
    let Some(at) = parts.iter().position(|&i| i == 0) else {
        return vec![0];
    };
    let (mut first, mut last) = (at, at);
    while first > 0 && continues(parts[first - 1]) {
        first -= 1;
    }
    while last + 1 < parts.len() && continues(parts[last]) {
        last += 1;
    }
    parts[first..=last].to_vec()
}

/// The parts joined into one event (given in the platform's order) under the identity of
/// `keep`, the journal row that carries it: the first part's message, reply and time, every
/// part's text and attachments in order, and the last part's tag (a paste whose last part may
/// continue can still take more).
pub(in crate::gateway::router) fn joined(
    parts: &[&MessageEvent],
    keep: &MessageEvent,
) -> MessageEvent {
    let mut ordered = parts.iter();
    let mut event = ordered
        .next()
        .map_or_else(|| keep.clone(), |e| (*e).clone());
    let kind = event.merge.as_ref().map_or(MergeKind::Album, |t| t.kind);
    let mut last_tag = event.merge.clone();
    for part in ordered {
        last_tag = part.merge.clone();
        event.append_part((*part).clone(), kind);
    }
    event.event_id = keep.event_id.clone();
    event.merge = match (event.merge.take(), last_tag) {
        (Some(first), Some(last)) => Some(MergeTag {
            order: first.order,
            ..last
        }),
        (first, _) => first,
    };
    event
}

impl ClusterLink {
    /// Readies the slot's front job (see the module docs): returns `true` when it may run
    /// now, `false` after a short wait for more parts (the caller reads the journal again).
    pub(in crate::gateway::router) async fn gather_parts(
        &self,
        slot: &Arc<Slot>,
        held: &Held,
        first_seen: &mut FirstSeen,
    ) -> bool {
        let now = Instant::now();
        // Decided and copied under one lock, so the indexes still name the planned jobs.
        let step = {
            let state = slot.lock();
            match plan(&state.queue, first_seen, now) {
                Gather::Join(parts) => match state.queue.front() {
                    Some(front) => Ok((
                        front.clone(),
                        parts
                            .iter()
                            .filter_map(|&i| state.queue.get(i).map(|job| job.event.clone()))
                            .collect::<Vec<_>>(),
                    )),
                    None => Err(Gather::Run),
                },
                other => Err(other),
            }
        };
        let (keep, events) = match step {
            Ok(join) => join,
            Err(Gather::Wait(until)) => {
                // Not a wait for the whole period: parts recorded meanwhile are seen (and
                // restart the period) at the next look, and a lost lease is noticed.
                let look_again = (until - now).clamp(LOOK_AGAIN_MIN, LOOK_AGAIN_MAX);
                tokio::time::sleep(look_again).await;
                return false;
            }
            Err(_) => return true,
        };
        let refs: Vec<&MessageEvent> = events.iter().collect();
        let event = joined(&refs, &keep.event);
        let absorbed: Vec<String> = events
            .iter()
            .filter(|e| e.event_id != keep.event.event_id)
            .map(|e| e.event_id.clone())
            .collect();
        let payload = match serde_json::to_value(&event) {
            Ok(payload) => payload,
            Err(e) => {
                tracing::warn!(event_id = %keep.event.event_id, error = %e, "cannot encode the joined parts; they run as separate turns");
                return true;
            }
        };
        let platform = keep.event.source.platform.clone();
        let folded = with_fence(
            held.lease().clone(),
            held.trust().clone(),
            self.store
                .fold_inbound(&platform, &keep.event.event_id, &payload, &absorbed),
        )
        .await;
        match folded {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(event_id = %keep.event.event_id, "parts to join were taken up meanwhile; they run as separate turns");
                return true;
            }
            Err(e) => {
                tracing::warn!(event_id = %keep.event.event_id, error = %e, "cannot join the parts; they run as separate turns");
                return true;
            }
        }
        tracing::debug!(event_id = %keep.event.event_id, parts = events.len(), "joined the parts of one message");
        let depth = &self.metrics.router_queue_depth;
        let absorbed: Vec<String> = absorbed.iter().map(|id| seen_key(&platform, id)).collect();
        let mut state = slot.lock();
        let jobs = state.discard_queue(depth);
        let kept = name_of(&keep);
        for mut job in jobs {
            let name = name_of(&job);
            if absorbed.contains(&name) {
                continue;
            }
            if name == kept && job.api.is_none() {
                job.event = event.clone();
            }
            state.enqueue(job, depth);
        }
        for name in absorbed {
            state.seen.insert(name);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hermes_adapter::SessionSource;

    const SECOND: Duration = Duration::from_secs(1);

    fn part(id: &str, text: &str, kind: MergeKind, order: i64, quiet_ms: u64) -> Job {
        let mut event = MessageEvent::text(id, SessionSource::dm("telegram", "42", "42"), text);
        event.message_id = Some(order.to_string());
        event.merge = Some(MergeTag {
            key: format!("{kind:?}:42"),
            kind,
            order,
            quiet_ms,
        });
        Job {
            event,
            resumed: false,
            api: None,
            authority: Default::default(),
        }
    }

    fn photo(id: &str, order: i64) -> Job {
        let mut job = part(id, "", MergeKind::Album, order, 800);
        job.event.media_paths.push(format!("/photo-{order}"));
        job
    }

    fn plain(id: &str) -> Job {
        let mut job = part(id, "hello", MergeKind::Album, 0, 0);
        job.event.merge = None;
        job
    }

    #[test]
    fn an_album_waits_for_its_quiet_period_from_the_newest_part_seen() {
        let start = Instant::now();
        let mut seen = FirstSeen::new();
        let mut queue = VecDeque::from([photo("1", 11)]);
        assert_eq!(
            plan(&queue, &mut seen, start),
            Gather::Wait(start + Duration::from_millis(800))
        );
        // A part seen later restarts the period.
        queue.push_back(photo("2", 12));
        let later = start + Duration::from_millis(500);
        assert_eq!(
            plan(&queue, &mut seen, later),
            Gather::Wait(later + Duration::from_millis(800))
        );
        let quiet = later + SECOND;
        assert_eq!(plan(&queue, &mut seen, quiet), Gather::Join(vec![0, 1]));
    }

    #[test]
    fn album_parts_join_in_the_platforms_order_around_other_events() {
        let start = Instant::now();
        let mut seen = FirstSeen::new();
        // Journaled (by different instances) out of the album's order, with another message
        // between them.
        let queue = VecDeque::from([photo("2", 12), plain("9"), photo("3", 13), photo("1", 11)]);
        assert!(matches!(plan(&queue, &mut seen, start), Gather::Wait(_)));
        assert_eq!(
            plan(&queue, &mut seen, start + SECOND),
            Gather::Join(vec![3, 0, 2])
        );
        let parts: Vec<&MessageEvent> = [3, 0, 2].iter().map(|&i| &queue[i].event).collect();
        let event = joined(&parts, &queue[0].event);
        assert_eq!(event.event_id, "2", "the kept row's identity");
        assert_eq!(
            event.message_id.as_deref(),
            Some("11"),
            "the album's first message"
        );
        assert_eq!(event.media_paths, ["/photo-11", "/photo-12", "/photo-13"]);
    }

    #[test]
    fn a_lone_part_runs_after_its_quiet_period_and_plain_events_at_once() {
        let start = Instant::now();
        let mut seen = FirstSeen::new();
        assert_eq!(
            plan(&VecDeque::from([plain("1")]), &mut seen, start),
            Gather::Run
        );
        // A part later than its group's turn is alone in the queue: its own turn.
        let queue = VecDeque::from([photo("4", 14)]);
        assert!(matches!(plan(&queue, &mut seen, start), Gather::Wait(_)));
        assert_eq!(plan(&queue, &mut seen, start + SECOND), Gather::Run);
        // A turn already started (resumed) is never held back or joined.
        let mut resumed = photo("5", 15);
        resumed.resumed = true;
        let queue = VecDeque::from([resumed, photo("6", 16)]);
        assert_eq!(plan(&queue, &mut seen, start), Gather::Run);
    }

    #[test]
    fn a_split_paste_joins_only_after_a_part_that_may_continue() {
        let start = Instant::now();
        let mut seen = FirstSeen::new();
        let head = "x".repeat(4096);
        // A short text that continues nothing runs at once.
        let queue = VecDeque::from([part("1", "hi", MergeKind::SplitText, 1, 0)]);
        assert_eq!(plan(&queue, &mut seen, start), Gather::Run);
        // A part of split length waits for the rest.
        let mut queue = VecDeque::from([part("2", &head, MergeKind::SplitText, 2, 1000)]);
        assert_eq!(plan(&queue, &mut seen, start), Gather::Wait(start + SECOND));
        // The rest arrives: it continues nothing, so the paste is complete at once.
        queue.push_back(part("3", "tail", MergeKind::SplitText, 3, 0));
        queue.push_back(part("4", "next", MergeKind::SplitText, 4, 0));
        let now = start + Duration::from_millis(200);
        assert_eq!(plan(&queue, &mut seen, now), Gather::Join(vec![0, 1]));
        let parts = [&queue[0].event, &queue[1].event];
        let event = joined(&parts, &queue[0].event);
        assert_eq!(event.text, format!("{head}\ntail"));
        assert_eq!(
            event.merge.as_ref().map(|t| (t.order, t.quiet_ms)),
            Some((2, 0))
        );
        // Journaled the other way round, the halves still join in the paste's order.
        let queue = VecDeque::from([
            part("6", "tail", MergeKind::SplitText, 6, 0),
            part("5", &head, MergeKind::SplitText, 5, 1000),
        ]);
        assert_eq!(plan(&queue, &mut seen, now), Gather::Join(vec![1, 0]));
    }
}
