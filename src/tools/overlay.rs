//! Tools that come and go while the process runs (an MCP server's tools), grouped by their
//! source, beside the registry's fixed built-ins.
//!
//! Readers take a snapshot (an `Arc` of the whole map), so a turn that is choosing or
//! dispatching a tool never holds the lock while a server publishes a new list; a list that
//! changes mid-turn takes effect for the next lookup.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use super::entry::ToolEntry;

/// The current dynamic tools by name; cheap to clone (all clones share one map).
#[derive(Debug, Clone, Default)]
pub struct ToolOverlay {
    inner: Arc<RwLock<Snapshot>>,
}

#[derive(Debug, Default)]
struct Snapshot {
    /// Which names each source published, so a source's new list replaces its old one.
    groups: BTreeMap<String, Vec<String>>,
    /// The source that published each name last: a source that is going away (a server
    /// being replaced by its reconfigured self) never removes its successor's tools.
    owners: BTreeMap<String, String>,
    tools: Arc<BTreeMap<String, ToolEntry>>,
}

impl ToolOverlay {
    pub fn new() -> Self {
        Self::default()
    }

    /// The tools as they are now.
    pub fn snapshot(&self) -> Arc<BTreeMap<String, ToolEntry>> {
        self.inner
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .tools
            .clone()
    }

    /// Replaces every tool `group` published before with `entries`.
    pub fn set_group(&self, group: &str, entries: Vec<ToolEntry>) {
        let mut inner = self.inner.write().unwrap_or_else(|e| e.into_inner());
        let mut tools = (*inner.tools).clone();
        for name in inner.groups.remove(group).unwrap_or_default() {
            if inner.owners.get(&name).is_some_and(|owner| owner == group) {
                inner.owners.remove(&name);
                tools.remove(&name);
            }
        }
        let names = entries.iter().map(|e| e.name.clone()).collect();
        for entry in entries {
            inner.owners.insert(entry.name.clone(), group.to_owned());
            tools.insert(entry.name.clone(), entry);
        }
        inner.groups.insert(group.to_owned(), names);
        inner.tools = Arc::new(tools);
    }

    /// Drops every tool of `group`.
    pub fn remove_group(&self, group: &str) {
        self.set_group(group, Vec::new());
        let mut inner = self.inner.write().unwrap_or_else(|e| e.into_inner());
        inner.groups.remove(group);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::ToolError;
    use crate::tools::entry::handler;
    use serde_json::{Value, json};

    fn entry(name: &str) -> ToolEntry {
        ToolEntry::new(
            name,
            "mcp-x",
            json!({"description": "d", "parameters": {"type": "object"}}),
            handler(|_ctx, _args: Value| async { Ok::<_, ToolError>(String::new()) }),
        )
    }

    #[test]
    fn a_group_replaces_its_own_tools_only() {
        let overlay = ToolOverlay::new();
        overlay.set_group("a", vec![entry("a1"), entry("a2")]);
        overlay.set_group("b", vec![entry("b1")]);
        let before = overlay.snapshot();
        overlay.set_group("a", vec![entry("a3")]);
        let names: Vec<_> = overlay.snapshot().keys().cloned().collect();
        assert_eq!(names, ["a3", "b1"]);
        assert_eq!(
            before.len(),
            3,
            "an old snapshot is not changed under its reader"
        );
        overlay.remove_group("b");
        let names: Vec<_> = overlay.snapshot().keys().cloned().collect();
        assert_eq!(names, ["a3"]);
        // A successor publishing the same names keeps them when its predecessor leaves.
        overlay.set_group("a#2", vec![entry("a3")]);
        overlay.remove_group("a");
        let names: Vec<_> = overlay.snapshot().keys().cloned().collect();
        assert_eq!(names, ["a3"]);
    }
}
