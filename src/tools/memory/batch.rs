//! Batched memory edits: several add/replace/remove operations applied all-or-nothing,
//! with the character limit checked only against the final result.

use serde_json::{Value, json};

use super::disk::char_len;
use super::store::{MemoryStore, Target};
use crate::tools::output::thousands;
use crate::tools::threats::first_threat_message;

impl MemoryStore {
    /// Applies add/replace/remove operations atomically, checking the limit only on the
    /// final result.
    pub fn apply_batch(&self, target: Target, operations: &[Value]) -> Value {
        if operations.is_empty() {
            return json!({"success": false, "error": "operations list is empty."});
        }
        for (i, op) in operations.iter().enumerate() {
            let action = op.get("action").and_then(Value::as_str);
            let content = op
                .get("content")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if matches!(action, Some("add" | "replace"))
                && !content.is_empty()
                && let Some(error) = first_threat_message(content)
            {
                return json!({"success": false, "error": format!("Operation {}: {error}", i + 1)});
            }
        }
        self.with_lock(target, |state| {
            if let Some(backup) = self.detect_drift(target) {
                return self.drift_error(target, &backup);
            }
            self.reload(state, target);
            let mut working = state.entries(target).clone();
            for (i, op) in operations.iter().enumerate() {
                let action = op.get("action").and_then(Value::as_str);
                let content = op.get("content").and_then(Value::as_str).unwrap_or_default().trim();
                let old_text = op.get("old_text").and_then(Value::as_str).unwrap_or_default().trim();
                let pos = format!("Operation {} ({})", i + 1, action.unwrap_or("unknown"));
                let failure = match action {
                    Some("add") if content.is_empty() => Some(format!("{pos}: content is required.")),
                    Some("add") => {
                        if !working.iter().any(|e| e == content) {
                            working.push(content.to_owned());
                        }
                        None
                    }
                    Some("replace" | "remove") if old_text.is_empty() => Some(format!("{pos}: old_text is required.")),
                    Some("replace") if content.is_empty() => {
                        Some(format!("{pos}: replace needs content; to delete use action='remove'."))
                    }
                    Some(act @ ("replace" | "remove")) => {
                        let matches: Vec<usize> = (0..working.len()).filter(|&j| working[j].contains(old_text)).collect();
                        let distinct: std::collections::BTreeSet<&String> = matches.iter().map(|&j| &working[j]).collect();
                        if matches.is_empty() {
                            Some(format!("{pos}: no entry matched '{old_text}'."))
                        } else if distinct.len() > 1 {
                            Some(format!("{pos}: '{old_text}' fits more than one different entry; quote more of the one you mean."))
                        } else {
                            if act == "replace" {
                                working[matches[0]] = content.to_owned();
                            } else {
                                working.remove(matches[0]);
                            }
                            None
                        }
                    }
                    _ => Some(format!("{pos}: the action has to be add, replace or remove.")),
                };
                if let Some(message) = failure {
                    let response = json!({
                        "success": false,
                        "error": format!("{message} Nothing was changed: a batch applies whole or not at all."),
                        "current_entries": state.entries(target).clone(),
                        "usage": self.usage(state, target),
                    });
                    return self.consolidation_failure(state, response);
                }
            }
            let limit = self.limit(target);
            let new_total = char_len(&working);
            if new_total > limit {
                let response = json!({
                    "success": false,
                    "error": format!(
                        "All {} operations together leave memory at {}/{} chars, over the limit. Retry the batch with more entries removed or shortened (current_entries lists them).",
                        operations.len(), thousands(new_total), thousands(limit)
                    ),
                    "current_entries": state.entries(target).clone(),
                    "usage": self.usage(state, target),
                });
                return self.consolidation_failure(state, response);
            }
            *state.entries(target) = working;
            if let Err(e) = self.save(state, target) {
                return Self::write_failed(e);
            }
            self.success(state, target, &format!("Applied {} operation(s).", operations.len()))
        })
    }
}
