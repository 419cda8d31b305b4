//! `MemoryStore` (Python `tools/memory_tool.py`): `$HERMES_HOME/memories/MEMORY.md` (the
//! agent's notes, 2,200 characters) and `USER.md` (the user profile, 1,375 characters), entries
//! separated by `\n§\n`. Every change re-reads the file under a lock (other sessions write
//! too), refuses to rewrite a file edited by hand (backing it up first), and writes
//! atomically. The system prompt gets a snapshot frozen at load time.

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use serde_json::{Value, json};

use super::disk::{Backing, ENTRY_DELIMITER, char_len, dedup, parse_entries, sanitize};
use crate::home::HermesHome;
use crate::tools::output::thousands;
use crate::tools::threats::first_threat_message;

pub const DEFAULT_MEMORY_CHAR_LIMIT: usize = 2200;
pub const DEFAULT_USER_CHAR_LIMIT: usize = 1375;

/// A memory file that could not be written; the model reads its text as the tool's error.
#[derive(Debug, thiserror::Error)]
#[error("Failed to write memory file {}: {source}", path.display())]
pub struct MemoryWriteError {
    path: std::path::PathBuf,
    #[source]
    source: std::io::Error,
}
/// Failed consolidations per turn before the tool tells the model to stop retrying.
const MAX_CONSOLIDATION_FAILURES_PER_TURN: u32 = 3;

/// Which file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Memory,
    User,
}

impl Target {
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "memory" => Some(Target::Memory),
            "user" => Some(Target::User),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Target::Memory => "memory",
            Target::User => "user",
        }
    }

    fn file_name(self) -> &'static str {
        match self {
            Target::Memory => "MEMORY.md",
            Target::User => "USER.md",
        }
    }

    fn header(self) -> &'static str {
        match self {
            Target::Memory => "MEMORY (your personal notes)",
            Target::User => "USER PROFILE (who the user is)",
        }
    }
}

#[derive(Debug, Default)]
pub(super) struct State {
    memory: Vec<String>,
    user: Vec<String>,
    snapshot_memory: String,
    snapshot_user: String,
    consolidation_failures: u32,
}

impl State {
    pub(super) fn entries(&mut self, target: Target) -> &mut Vec<String> {
        match target {
            Target::Memory => &mut self.memory,
            Target::User => &mut self.user,
        }
    }
}

/// Bounded, file-backed memory for one agent.
#[derive(Debug)]
pub struct MemoryStore {
    dir: PathBuf,
    memory_char_limit: usize,
    user_char_limit: usize,
    state: Mutex<State>,
    backing: Backing,
}

impl MemoryStore {
    pub fn new(home: &HermesHome, memory_char_limit: usize, user_char_limit: usize) -> Self {
        Self {
            dir: home.path().join("memories"),
            memory_char_limit,
            user_char_limit,
            state: Mutex::new(State::default()),
            backing: Backing::Files,
        }
    }

    /// Keeps the files in PostgreSQL, shared by several instances, and loads them from there.
    /// The first instance to find none there seeds them from its home's files.
    pub fn with_shared(
        mut self,
        shared: impl Into<crate::coord::SharedFiles>,
    ) -> std::io::Result<Self> {
        let shared = shared.into();
        for target in [Target::Memory, Target::User] {
            let path = self.path_for(target);
            let name = super::disk::shared_name(&path);
            let _lock = shared.lock(&name)?;
            if shared.read(&name)?.is_none()
                && let Ok(bytes) = std::fs::read(&path)
            {
                shared.write(&name, &bytes)?;
                tracing::info!(file = %name, "memory file copied into the shared database");
            }
        }
        self.backing = Backing::Shared(shared);
        self.load_from_disk()?;
        Ok(self)
    }

    fn read_entries(&self, target: Target) -> Vec<String> {
        self.backing
            .read(&self.path_for(target))
            .map(|raw| parse_entries(&raw))
            .unwrap_or_default()
    }

    /// A store with the default limits, loaded from disk.
    pub fn open(home: &HermesHome) -> std::io::Result<Self> {
        let store = Self::new(home, DEFAULT_MEMORY_CHAR_LIMIT, DEFAULT_USER_CHAR_LIMIT);
        store.load_from_disk()?;
        Ok(store)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn path_for(&self, target: Target) -> PathBuf {
        self.dir.join(target.file_name())
    }

    pub(super) fn limit(&self, target: Target) -> usize {
        match target {
            Target::Memory => self.memory_char_limit,
            Target::User => self.user_char_limit,
        }
    }

    /// Reads both files and freezes the system-prompt snapshot; entries matching a threat
    /// pattern are replaced by a `[BLOCKED: ...]` placeholder in the snapshot only.
    pub fn load_from_disk(&self) -> std::io::Result<()> {
        if matches!(self.backing, Backing::Files) {
            crate::home::private::create_dir_all(&self.dir)?;
        }
        let memory = dedup(self.read_entries(Target::Memory));
        let user = dedup(self.read_entries(Target::User));
        let mut state = self.state();
        state.snapshot_memory = self.render_block(Target::Memory, &sanitize(&memory, "MEMORY.md"));
        state.snapshot_user = self.render_block(Target::User, &sanitize(&user, "USER.md"));
        state.memory = memory;
        state.user = user;
        Ok(())
    }

    /// The frozen block for the system prompt, `None` when the file was empty at load.
    pub fn format_for_system_prompt(&self, target: Target) -> Option<String> {
        let state = self.state();
        let block = match target {
            Target::Memory => &state.snapshot_memory,
            Target::User => &state.snapshot_user,
        };
        (!block.is_empty()).then(|| block.clone())
    }

    /// The live entries.
    pub fn entries(&self, target: Target) -> Vec<String> {
        self.state().entries(target).clone()
    }

    /// Call at the start of each turn.
    pub fn reset_consolidation_failures(&self) {
        self.state().consolidation_failures = 0;
    }

    fn render_block(&self, target: Target, entries: &[String]) -> String {
        if entries.is_empty() {
            return String::new();
        }
        let limit = self.limit(target);
        let content = entries.join(ENTRY_DELIMITER);
        let current = content.chars().count();
        let pct = (current * 100).checked_div(limit).map_or(0, |p| p.min(100));
        let separator = "═".repeat(46);
        format!(
            "{separator}\n{} [{pct}% — {}/{} chars]\n{separator}\n{content}",
            target.header(),
            thousands(current),
            thousands(limit)
        )
    }

    pub(super) fn usage(&self, state: &mut State, target: Target) -> String {
        let current = char_len(state.entries(target));
        format!("{}/{}", thousands(current), thousands(self.limit(target)))
    }

    pub(super) fn consolidation_failure(&self, state: &mut State, response: Value) -> Value {
        state.consolidation_failures += 1;
        if state.consolidation_failures <= MAX_CONSOLIDATION_FAILURES_PER_TURN {
            return response;
        }
        json!({
            "success": false,
            "done": true,
            "error": format!(
                "{} memory changes failed this turn. Leave memory as it is, answer the user, and save the fact in a later turn.",
                state.consolidation_failures
            ),
        })
    }

    pub(super) fn success(&self, state: &mut State, target: Target, message: &str) -> Value {
        state.consolidation_failures = 0;
        let limit = self.limit(target);
        let entries = state.entries(target).clone();
        let current = char_len(&entries);
        let pct = (current * 100).checked_div(limit).map_or(0, |p| p.min(100));
        json!({
            "success": true,
            "done": true,
            "target": target.name(),
            "usage": format!("{pct}% — {}/{} chars", thousands(current), thousands(limit)),
            "entry_count": entries.len(),
            "message": message,
            "note": "Saved; this change is complete, do not send it again.",
        })
    }

    /// Content written by something else (a manual edit, a shell append) that a rewrite
    /// would lose: backs the file up and returns the backup path.
    pub(super) fn detect_drift(&self, target: Target) -> Option<String> {
        let path = self.path_for(target);
        let raw = self.backing.read(&path)?;
        if raw.trim().is_empty() {
            return None;
        }
        let parsed: Vec<&str> = raw
            .split(ENTRY_DELIMITER)
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .collect();
        let roundtrip = parsed.join(ENTRY_DELIMITER);
        let longest = parsed.iter().map(|e| e.chars().count()).max().unwrap_or(0);
        if raw.trim() == roundtrip && longest <= self.limit(target) {
            return None;
        }
        let ts = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let backup = PathBuf::from(format!("{}.bak.{ts}", path.display()));
        let shown = self.backing.describe(&backup);
        Some(match self.backing.write(&backup, raw.as_bytes()) {
            Ok(()) => shown,
            Err(_) => format!("{shown} (BACKUP FAILED — file unchanged on disk)"),
        })
    }

    pub(super) fn drift_error(&self, target: Target, backup: &str) -> Value {
        json!({
            "success": false,
            "error": format!(
                "Not written: {} holds text the memory tool did not put there (an edit, a shell append, another session) and would drop. A copy is at {backup}. Make the file a plain §-separated list of entries again, or move the extra text elsewhere, then retry.",
                target.file_name()
            ),
            "drift_backup": backup,
            "remediation": "Re-add what the .bak copy holds beyond the entries with memory(action=add, content=...), then clean up the original file.",
        })
    }

    pub(super) fn reload(&self, state: &mut State, target: Target) {
        *state.entries(target) = dedup(self.read_entries(target));
    }

    pub(super) fn save(&self, state: &mut State, target: Target) -> Result<(), MemoryWriteError> {
        let content = state.entries(target).join(ENTRY_DELIMITER);
        let path = self.path_for(target);
        self.backing
            .write(&path, content.as_bytes())
            .map_err(|source| MemoryWriteError { path, source })
    }

    pub(super) fn with_lock<T>(&self, target: Target, f: impl FnOnce(&mut State) -> T) -> T {
        let _lock = self.backing.lock(&self.path_for(target));
        let mut state = self.state();
        f(&mut state)
    }

    pub(super) fn write_failed(error: MemoryWriteError) -> Value {
        json!({"success": false, "error": error.to_string()})
    }

    /// Appends an entry.
    pub fn add(&self, target: Target, content: &str) -> Value {
        let content = content.trim();
        if content.is_empty() {
            return json!({"success": false, "error": "Content cannot be empty."});
        }
        if let Some(error) = first_threat_message(content) {
            return json!({"success": false, "error": error});
        }
        self.with_lock(target, |state| {
            self.reload(state, target);
            if state.entries(target).iter().any(|e| e == content) {
                return self.success(state, target, "Entry already exists (no duplicate added).");
            }
            let limit = self.limit(target);
            let mut candidate = state.entries(target).clone();
            candidate.push(content.to_owned());
            if char_len(&candidate) > limit {
                let current = char_len(state.entries(target));
                let response = json!({
                    "success": false,
                    "error": format!(
                        "Memory holds {}/{} chars; this {}-char entry does not fit. In this turn, merge entries with 'replace' or drop outdated ones with 'remove' (current_entries lists them), then add again.",
                        thousands(current), thousands(limit), content.chars().count()
                    ),
                    "current_entries": state.entries(target).clone(),
                    "usage": self.usage(state, target),
                });
                return self.consolidation_failure(state, response);
            }
            *state.entries(target) = candidate;
            if let Err(e) = self.save(state, target) {
                return Self::write_failed(e);
            }
            self.success(state, target, "Entry added.")
        })
    }

    fn find_one(
        &self,
        state: &mut State,
        target: Target,
        old_text: &str,
        verb: &str,
    ) -> Result<usize, Value> {
        let entries = state.entries(target).clone();
        let matches: Vec<usize> = (0..entries.len())
            .filter(|&i| entries[i].contains(old_text))
            .collect();
        if matches.is_empty() {
            let response = json!({
                "success": false,
                "error": format!("No entry contains '{old_text}'. Pick text from one of current_entries and {verb} again."),
                "current_entries": entries,
            });
            return Err(self.consolidation_failure(state, response));
        }
        let distinct: std::collections::BTreeSet<&String> =
            matches.iter().map(|&i| &entries[i]).collect();
        if distinct.len() > 1 {
            let previews: Vec<String> = matches
                .iter()
                .map(|&i| {
                    let e = &entries[i];
                    let head: String = e.chars().take(80).collect();
                    if e.chars().count() > 80 {
                        format!("{head}...")
                    } else {
                        head
                    }
                })
                .collect();
            return Err(json!({
                "success": false,
                "error": format!("Multiple entries matched '{old_text}'. Be more specific."),
                "matches": previews,
            }));
        }
        Ok(matches[0])
    }

    /// Replaces the entry containing `old_text` with `new_content`.
    pub fn replace(&self, target: Target, old_text: &str, new_content: &str) -> Value {
        let (old_text, new_content) = (old_text.trim(), new_content.trim());
        if old_text.is_empty() {
            return json!({"success": false, "error": "old_text cannot be empty."});
        }
        if new_content.is_empty() {
            return json!({"success": false, "error": "The new content is empty; to delete an entry use 'remove'."});
        }
        if let Some(error) = first_threat_message(new_content) {
            return json!({"success": false, "error": error});
        }
        self.with_lock(target, |state| {
            if let Some(backup) = self.detect_drift(target) {
                return self.drift_error(target, &backup);
            }
            self.reload(state, target);
            let index = match self.find_one(state, target, old_text, "replace") {
                Ok(index) => index,
                Err(response) => return response,
            };
            let limit = self.limit(target);
            let mut candidate = state.entries(target).clone();
            candidate[index] = new_content.to_owned();
            let new_total = char_len(&candidate);
            if new_total > limit {
                let response = json!({
                    "success": false,
                    "error": format!(
                        "With this replacement memory would hold {}/{} chars. In this turn, shorten it or 'remove' outdated entries (current_entries lists them), then retry.",
                        thousands(new_total), thousands(limit)
                    ),
                    "current_entries": state.entries(target).clone(),
                    "usage": self.usage(state, target),
                });
                return self.consolidation_failure(state, response);
            }
            *state.entries(target) = candidate;
            if let Err(e) = self.save(state, target) {
                return Self::write_failed(e);
            }
            self.success(state, target, "Entry replaced.")
        })
    }

    /// Removes the entry containing `old_text`.
    pub fn remove(&self, target: Target, old_text: &str) -> Value {
        let old_text = old_text.trim();
        if old_text.is_empty() {
            return json!({"success": false, "error": "old_text cannot be empty."});
        }
        self.with_lock(target, |state| {
            if let Some(backup) = self.detect_drift(target) {
                return self.drift_error(target, &backup);
            }
            self.reload(state, target);
            let index = match self.find_one(state, target, old_text, "remove") {
                Ok(index) => index,
                Err(response) => return response,
            };
            state.entries(target).remove(index);
            if let Err(e) = self.save(state, target) {
                return Self::write_failed(e);
            }
            self.success(state, target, "Entry removed.")
        })
    }

    /// The inventory returned when replace/remove arrives without `old_text`.
    pub fn missing_old_text(&self, target: Target, action: &str) -> Value {
        let mut state = self.state();
        json!({
            "success": false,
            "error": format!("'{action}' needs old_text: a short piece of the entry to {action}, taken from current_entries."),
            "current_entries": state.entries(target).clone(),
            "usage": self.usage(&mut state, target),
        })
    }
}
