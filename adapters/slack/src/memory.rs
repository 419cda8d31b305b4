//! Bounded in-memory sets the gating and dedupe rules consult (the reference's
//! `_bot_message_ts`, `_mentioned_threads`, `MessageDeduplicator`): thread roots the bot
//! posted in or was mentioned in, message timestamps already handed over, prompts already
//! answered. Each forgets its oldest entries past a cap, as the reference does.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Mutex;

use crate::assistant::AssistantThread;

/// The reference's cap (`_BOT_TS_MAX`, `_MENTIONED_THREADS_MAX`).
pub const MEMORY_CAP: usize = 5000;

/// A set that remembers at most `cap` entries, evicting the oldest.
#[derive(Debug)]
pub struct BoundedSet {
    order: VecDeque<String>,
    members: HashSet<String>,
    cap: usize,
}

impl BoundedSet {
    pub fn new(cap: usize) -> Self {
        Self {
            order: VecDeque::new(),
            members: HashSet::new(),
            cap,
        }
    }

    pub fn contains(&self, key: &str) -> bool {
        self.members.contains(key)
    }

    /// Inserts `key`; returns false when it was already present.
    pub fn insert(&mut self, key: &str) -> bool {
        if !self.members.insert(key.to_owned()) {
            return false;
        }
        self.order.push_back(key.to_owned());
        while self.order.len() > self.cap {
            if let Some(old) = self.order.pop_front() {
                self.members.remove(&old);
            }
        }
        true
    }

    pub fn remove(&mut self, key: &str) -> bool {
        if self.members.remove(key) {
            self.order.retain(|k| k != key);
            true
        } else {
            false
        }
    }
}

/// Everything the adapter remembers between events; shared by the socket loop and sends.
#[derive(Debug)]
pub struct Memory {
    /// Timestamps of messages the bot posted, and the thread roots it posted in.
    pub bot_threads: BoundedSet,
    /// Thread roots where the bot was @mentioned (auto-respond afterwards).
    pub mentioned_threads: BoundedSet,
    /// `channel:ts` of messages already handed to the core (message + app_mention dedupe).
    pub handed_over: BoundedSet,
    /// `channel:ts` of prompt messages whose buttons were already used.
    pub answered_prompts: BoundedSet,
    /// `channel:thread_ts` where an assistant status is showing.
    pub status_threads: BoundedSet,
    /// `channel:thread_ts` of thread parents that mentioned the bot.
    pub mentioned_parents: BoundedSet,
    /// Thread parents by `channel:thread_ts`: their text and whether the bot wrote them.
    pub thread_parents: HashMap<String, (String, bool)>,
    /// Display names by user id (`users.info`, reference `_resolve_user_name`).
    pub user_names: HashMap<String, String>,
    /// `channel:thread` → the addressed message that gets the progress reactions.
    pub reacting: HashMap<String, Reacting>,
    /// `channel:thread_ts` → the assistant threads Slack said were opened (split view).
    pub assistant_threads: HashMap<String, AssistantThread>,
}

impl Default for Memory {
    fn default() -> Self {
        Self {
            bot_threads: BoundedSet::new(MEMORY_CAP),
            mentioned_threads: BoundedSet::new(MEMORY_CAP),
            handed_over: BoundedSet::new(MEMORY_CAP),
            answered_prompts: BoundedSet::new(MEMORY_CAP),
            status_threads: BoundedSet::new(MEMORY_CAP),
            user_names: HashMap::new(),
            thread_parents: HashMap::new(),
            mentioned_parents: BoundedSet::new(MEMORY_CAP),
            reacting: HashMap::new(),
            assistant_threads: HashMap::new(),
        }
    }
}

/// An addressed message (1:1 DM or mention) that wears `eyes` while its turn runs and
/// `white_check_mark` once answered (reference `on_processing_start/complete`).
#[derive(Debug, Clone)]
pub struct Reacting {
    pub channel: String,
    pub ts: String,
    pub eyes_added: bool,
}

impl Memory {
    /// Remembers an addressed message; the map is cleared if it ever outgrows the cap
    /// (turns that never got an answer).
    pub fn remember_reacting(&mut self, thread_key: String, reacting: Reacting) {
        if self.reacting.len() >= MEMORY_CAP {
            self.reacting.clear();
        }
        self.reacting.insert(thread_key, reacting);
    }
}

impl Memory {
    pub fn remember_thread_parent(&mut self, key: String, text: String, own: bool) {
        if self.thread_parents.len() >= MEMORY_CAP {
            self.thread_parents.clear();
        }
        self.thread_parents.insert(key, (text, own));
    }

    pub fn remember_assistant_thread(&mut self, thread: AssistantThread) {
        if self.assistant_threads.len() >= MEMORY_CAP {
            self.assistant_threads.clear();
        }
        self.assistant_threads
            .insert(key(&thread.channel_id, &thread.thread_ts), thread);
    }

    pub fn remember_user_name(&mut self, user_id: &str, name: &str) {
        if self.user_names.len() >= MEMORY_CAP {
            self.user_names.clear();
        }
        self.user_names.insert(user_id.to_owned(), name.to_owned());
    }
}

/// The memory behind a mutex; held only for a few set operations, never across awaits.
pub type SharedMemory = Mutex<Memory>;

pub fn key(channel: &str, ts: &str) -> String {
    format!("{channel}:{ts}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_set_forgets_the_oldest() {
        let mut set = BoundedSet::new(2);
        assert!(set.insert("a"));
        assert!(!set.insert("a"));
        set.insert("b");
        set.insert("c");
        assert!(!set.contains("a"));
        assert!(set.contains("b") && set.contains("c"));
        assert!(set.remove("b"));
        assert!(!set.contains("b"));
    }
}
