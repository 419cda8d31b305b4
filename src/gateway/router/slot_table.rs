//! The table of slots, one per session key with recent work. It owns only the map: what a
//! slot holds and how work enters it are `slot.rs` and `busy.rs`. Reads that look across
//! every slot (eviction, interrupting at shutdown, the liveness probe, finding the turn a
//! prompt belongs to) go through here so the map's lock is taken in one place.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use super::slot::Slot;

/// Every live slot by session key.
#[derive(Debug, Default)]
pub(super) struct SlotTable {
    slots: Mutex<HashMap<String, Arc<Slot>>>,
}

impl SlotTable {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Arc<Slot>>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The slot of `key`, made empty when it has none yet.
    pub(super) fn get_or_create(&self, key: &str) -> Arc<Slot> {
        self.lock()
            .entry(key.to_owned())
            .or_insert_with(|| Arc::new(Slot::new(key.to_owned())))
            .clone()
    }

    /// The slot of `key` if it has one; never creates it.
    pub(super) fn get(&self, key: &str) -> Option<Arc<Slot>> {
        self.lock().get(key).cloned()
    }

    /// Drops slots idle longer than `idle` with nothing queued, running or waiting on a
    /// person; returns each dropped key with the session id of the agent it cached.
    pub(super) fn evict_idle(&self, idle: Duration) -> Vec<(String, Option<String>)> {
        let mut evicted = Vec::new();
        self.lock().retain(|key, slot| {
            let state = slot.lock();
            let keep = state.worker
                || state.running.is_some()
                || !state.queue.is_empty()
                || state.approval.is_some()
                || state.clarify.is_some()
                || state.last_active.is_some_and(|t| t.elapsed() < idle);
            if !keep {
                evicted.push((
                    key.clone(),
                    state.agent.as_ref().map(|a| a.session_id().to_owned()),
                ));
            }
            keep
        });
        evicted
    }

    /// Cancels every running turn.
    pub(super) fn interrupt_all(&self) {
        for slot in self.lock().values() {
            if let Some(running) = &slot.lock().running {
                running.cancel.cancel();
            }
        }
    }

    /// Slots with a turn running or a worker draining them.
    pub(super) fn running_turns(&self) -> usize {
        self.lock()
            .values()
            .filter(|slot| {
                let s = slot.lock();
                s.running.is_some() || s.worker
            })
            .count()
    }

    /// The first slot for which `pick` says something, in no particular order.
    pub(super) fn find_map<T>(&self, pick: impl FnMut(&Arc<Slot>) -> Option<T>) -> Option<T> {
        self.lock().values().find_map(pick)
    }

    /// The keys of the slots `matches` accepts, sorted.
    pub(super) fn keys_where(&self, mut matches: impl FnMut(&Slot) -> bool) -> Vec<String> {
        let mut keys: Vec<String> = self
            .lock()
            .iter()
            .filter(|(_, slot)| matches(slot))
            .map(|(key, _)| key.clone())
            .collect();
        keys.sort();
        keys
    }
}
