//! Groups upgraded to supergroups: Telegram refuses sends to the old chat id with
//! `migrate_to_chat_id` (https://core.telegram.org/bots/api#responseparameters), and the
//! adapter sends to the supergroup from then on.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Old chat id → the supergroup's chat id, shared by every send of one adapter.
#[derive(Debug, Clone, Default)]
pub struct Migrations {
    moved: Arc<Mutex<HashMap<String, String>>>,
    /// Moves the core has not been told about yet (`Adapter::take_chat_migrations`).
    untold: Arc<Mutex<Vec<(String, String)>>>,
}

impl Migrations {
    /// Where a send to `chat_id` goes now (following chains of upgrades).
    pub fn resolve(&self, chat_id: &str) -> String {
        let moved = self.moved.lock().unwrap_or_else(|e| e.into_inner());
        let mut current = chat_id.to_owned();
        for _ in 0..4 {
            match moved.get(&current) {
                Some(next) => current = next.clone(),
                None => break,
            }
        }
        current
    }

    pub fn record(&self, from: &str, to: &str) {
        if from == to {
            return;
        }
        let previous = self
            .moved
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(from.to_owned(), to.to_owned());
        if previous.as_deref() != Some(to) {
            self.untold
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((from.to_owned(), to.to_owned()));
        }
    }

    /// The moves recorded since the last call.
    pub fn take_untold(&self) -> Vec<(String, String)> {
        std::mem::take(&mut *self.untold.lock().unwrap_or_else(|e| e.into_inner()))
    }
}
