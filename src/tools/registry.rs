//! The tool registry: entries with the Python `registry.register()` fields, OpenAI function
//! definitions filtered by toolsets and `check_fn`, and dispatch that always yields JSON.
//!
//! Errors are wrapped on two levels, as in Hermes: a failing or panicking handler becomes
//! `{"error": "[TOOL_ERROR] Tool execution failed: <Kind>: <msg>"}` (Python's
//! `registry.dispatch`), and anything that goes wrong around the handler becomes
//! `{"error": "[TOOL_ERROR] Error executing <tool>: <msg>"}` (`handle_function_call`).

use std::collections::{BTreeMap, HashMap};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, LazyLock};

use futures_util::FutureExt;
use regex::Regex;
use serde_json::{Value, json};

use super::context::ToolCtx;
pub use super::entry::{CheckFn, Handler, ToolEntry, ToolFuture, check_fn, handler};
use super::overlay::ToolOverlay;
use super::{coerce, toolsets};

/// Tools the agent loop intercepts because they need agent-level state. Their schemas are
/// registered so the model sees them; their registry handlers only return a stub error.
pub const AGENT_LEVEL_TOOLS: [&str; 4] = ["todo", "memory", "session_search", "delegate_task"];

/// Tools that talk to the user and therefore run one at a time, never concurrently.
const INTERACTIVE_TOOLS: [&str; 1] = ["clarify"];

/// All registered tools, by name. Build it once, then share it: the built-ins are fixed;
/// dynamic tools (MCP) live in an attached [`ToolOverlay`] and a built-in wins a name clash.
#[derive(Debug, Default, Clone)]
pub struct ToolRegistry {
    tools: BTreeMap<String, ToolEntry>,
    overlay: Option<ToolOverlay>,
}

/// The prefix of the toolset each MCP server's tools belong to (`mcp-<server>`).
pub use crate::config::toolset_names::MCP_TOOLSET_PREFIX;

/// Whether a toolset list names `entry`'s toolset. An MCP server's tools are also selected
/// by the server's bare name and by `mcp` (every MCP tool).
fn names_toolset(names: &[String], toolset: &str) -> bool {
    let named = |wanted: &str| names.iter().any(|n| n == wanted);
    named(toolset)
        || toolset
            .strip_prefix(MCP_TOOLSET_PREFIX)
            .is_some_and(|server| named("mcp") || named(server))
}

impl ToolRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool. A second registration under the same name replaces the first, with a
    /// warning, as the seed describes.
    pub fn register(&mut self, entry: ToolEntry) {
        if let Some(existing) = self.tools.get(&entry.name) {
            tracing::warn!(
                tool = %entry.name,
                old_toolset = %existing.toolset,
                new_toolset = %entry.toolset,
                "tool name collision; the later registration wins"
            );
        }
        self.tools.insert(entry.name.clone(), entry);
    }

    /// Attaches the dynamic tools (MCP servers' tools).
    pub fn with_overlay(mut self, overlay: ToolOverlay) -> Self {
        self.overlay = Some(overlay);
        self
    }

    pub fn get(&self, name: &str) -> Option<&ToolEntry> {
        self.tools.get(name)
    }

    /// A built-in or dynamic tool by name.
    pub fn entry(&self, name: &str) -> Option<ToolEntry> {
        if let Some(entry) = self.tools.get(name) {
            return Some(entry.clone());
        }
        self.dynamic().get(name).cloned()
    }

    /// The dynamic tools (an MCP server's) as they are now: a snapshot that stays the same
    /// `Arc` until a source publishes a new list, so callers may remember what they derived.
    pub fn dynamic_snapshot(&self) -> Arc<BTreeMap<String, ToolEntry>> {
        self.dynamic()
    }

    /// The dynamic tools as they are now, without the names a built-in holds.
    fn dynamic(&self) -> Arc<BTreeMap<String, ToolEntry>> {
        self.overlay
            .as_ref()
            .map(ToolOverlay::snapshot)
            .unwrap_or_default()
    }

    /// Every registered tool name (built-in and dynamic), sorted.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.tools.keys().cloned().collect();
        names.extend(self.dynamic().keys().cloned());
        names.sort();
        names.dedup();
        names
    }

    /// The emoji for a tool's progress display (Python's default is ⚡).
    pub fn emoji(&self, name: &str) -> &str {
        self.tools
            .get(name)
            .map(|e| e.emoji.as_str())
            .filter(|e| !e.is_empty())
            .unwrap_or("⚡")
    }

    /// Whether the loop must run this tool on its own (it waits for the user).
    pub fn is_interactive(&self, name: &str) -> bool {
        INTERACTIVE_TOOLS.contains(&name)
    }

    /// The OpenAI function definitions for the tools the toolsets select, sorted by name.
    /// `enabled: None` means every toolset; `disabled` is subtracted last. Each distinct
    /// `check_fn` runs at most once per call; a false or panicking check hides its tools.
    pub fn definitions(
        &self,
        enabled: Option<&[String]>,
        disabled: &[String],
        ctx: &ToolCtx,
    ) -> Vec<Value> {
        let mut wanted = toolsets::resolve_toolsets(enabled, &[]);
        let dynamic = self.dynamic();
        let lookup = |name: &str| self.tools.get(name).or_else(|| dynamic.get(name));
        let all = self.tools.values().chain(
            dynamic
                .values()
                .filter(|e| !self.tools.contains_key(&e.name)),
        );
        // Tools registered under a toolset name that the caller enabled (or, with no
        // explicit list, every registered toolset) are part of it even when the static
        // table does not list them — Python merges registry membership the same way.
        for entry in all {
            let selected = enabled.is_none_or(|names| {
                names_toolset(names, &entry.toolset) || names.iter().any(|n| n == "all" || n == "*")
            });
            if selected {
                wanted.insert(entry.name.clone());
            }
        }
        // Disabled toolsets are subtracted last, whatever brought a tool in.
        let removed = toolsets::disabled_tools(disabled);
        wanted.retain(|name| {
            !removed.contains(name)
                && !lookup(name).is_some_and(|e| names_toolset(disabled, &e.toolset))
        });
        let mut checked: HashMap<*const (), bool> = HashMap::new();
        let mut result = Vec::new();
        for name in &wanted {
            let Some(entry) = lookup(name.as_str()) else {
                continue;
            };
            if let Some(check) = &entry.check_fn {
                let key = Arc::as_ptr(check) as *const ();
                let available = *checked.entry(key).or_insert_with(|| run_check(check, ctx));
                if !available {
                    tracing::debug!(tool = %name, "tool unavailable (check failed)");
                    continue;
                }
            }
            let mut schema = match &entry.schema {
                Value::Object(map) => map.clone(),
                _ => serde_json::Map::new(),
            };
            schema.insert("name".to_owned(), Value::String(entry.name.clone()));
            result.push(json!({"type": "function", "function": Value::Object(schema)}));
        }
        result
    }

    /// Runs a tool from a model tool call. Always returns a JSON string: unknown tools, bad
    /// arguments, handler errors and panics all become `{"error": ...}`. Every secret the
    /// daemon knows and every credential in a known shape is masked in it, whichever tool
    /// produced it: this is the one door tool output passes on its way to the model.
    pub async fn dispatch(&self, name: &str, raw_args: &str, ctx: ToolCtx) -> String {
        crate::logging::mask_secrets(&self.dispatch_unmasked(name, raw_args, ctx).await)
    }

    async fn dispatch_unmasked(&self, name: &str, raw_args: &str, ctx: ToolCtx) -> String {
        let args = match parse_arguments(raw_args) {
            Ok(args) => args,
            Err(invalid) => return invalid.tool_result(),
        };
        let outer = AssertUnwindSafe(self.dispatch_parsed(name, args, ctx))
            .catch_unwind()
            .await;
        match outer {
            Ok(result) => result,
            Err(panic) => {
                let message = format!("Error executing {name}: {}", panic_message(&*panic));
                tracing::error!(tool = %name, error = %message, "tool dispatch failed");
                error_json(&sanitize_tool_error(&message))
            }
        }
    }

    async fn dispatch_parsed(&self, name: &str, args: Value, ctx: ToolCtx) -> String {
        let Some(entry) = self.entry(name) else {
            return error_json(&format!("Unknown tool: {name}"));
        };
        let args = coerce::coerce_tool_args(&entry.schema, args);
        let handler = Arc::clone(&entry.handler);
        // A handler may panic while building its future or while running it.
        let started = std::panic::catch_unwind(AssertUnwindSafe(|| handler(ctx, args)));
        let outcome = match started {
            Ok(future) => AssertUnwindSafe(future).catch_unwind().await,
            Err(panic) => Err(panic),
        };
        let failure = match outcome {
            Ok(Ok(result)) => return result,
            Ok(Err(error)) => format!("Tool execution failed: {}: {error}", error.kind()),
            Err(panic) => format!("Tool execution failed: panic: {}", panic_message(&*panic)),
        };
        tracing::warn!(tool = %name, error = %failure, "tool failed");
        error_json(&sanitize_tool_error(&failure))
    }
}

fn run_check(check: &CheckFn, ctx: &ToolCtx) -> bool {
    std::panic::catch_unwind(AssertUnwindSafe(|| check(ctx))).unwrap_or_else(|_| {
        tracing::warn!("tool check_fn panicked; its tools are unavailable this turn");
        false
    })
}

/// Tool arguments the model sent that are not a JSON object (malformed JSON included).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("The arguments were not a JSON object, so the tool did not run.")]
pub struct ArgumentsNotAnObject;

impl ArgumentsNotAnObject {
    /// The tool result the model gets instead of running the tool, in the shape the Python
    /// agent gives it ("Invalid tool arguments" plus this error's text).
    pub fn tool_result(&self) -> String {
        json!({
            "error": "Invalid tool arguments",
            "message": self.to_string(),
        })
        .to_string()
    }
}

/// Parses model-emitted arguments: empty means `{}`, anything but a JSON object is refused.
/// The agent loop uses it for the tools it intercepts before [`ToolRegistry::dispatch`].
pub fn parse_arguments(raw: &str) -> Result<Value, ArgumentsNotAnObject> {
    if raw.trim().is_empty() {
        return Ok(Value::Object(serde_json::Map::new()));
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(value @ Value::Object(_)) => Ok(value),
        _ => Err(ArgumentsNotAnObject),
    }
}

fn error_json(message: &str) -> String {
    json!({ "error": message }).to_string()
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_owned()
    }
}

const TOOL_ERROR_MAX_LEN: usize = 2000;

static ROLE_TAG: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)</?(?:tool_call|function_call|result|response|output|input|system|assistant|user)>",
    )
    .expect("role tag regex")
});
static FENCE_OPEN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?m)^\s*```(?:json|xml|html|markdown)?\s*").expect("fence regex")
});
static FENCE_CLOSE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?m)\s*```\s*$").expect("fence regex"));
static CDATA: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?s)<!\[CDATA\[.*?\]\]>").expect("cdata regex"));

/// Strips framing tokens (role tags, code fences, CDATA) from an error before the model
/// sees it and caps it at 2000 characters (Python `_sanitize_tool_error`).
pub fn sanitize_tool_error(message: &str) -> String {
    if message.is_empty() {
        return "[TOOL_ERROR] ".to_owned();
    }
    let s = ROLE_TAG.replace_all(message, "");
    let s = FENCE_OPEN.replace_all(&s, "");
    let s = FENCE_CLOSE.replace_all(&s, "");
    let s = CDATA.replace_all(&s, "");
    let capped = if s.chars().count() > TOOL_ERROR_MAX_LEN {
        let head: String = s.chars().take(TOOL_ERROR_MAX_LEN - 3).collect();
        format!("{head}...")
    } else {
        s.into_owned()
    };
    format!("[TOOL_ERROR] {capped}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitizer_strips_framing_and_caps_length() {
        let raw = "bad </tool_call> thing <![CDATA[x]]>\n```json\n{}\n```";
        let clean = sanitize_tool_error(raw);
        assert!(clean.starts_with("[TOOL_ERROR] bad  thing"), "{clean}");
        assert!(!clean.contains("tool_call") && !clean.contains("CDATA") && !clean.contains("```"));
        let long = sanitize_tool_error(&"x".repeat(5000));
        assert_eq!(long.chars().count(), "[TOOL_ERROR] ".len() + 2000);
        assert!(long.ends_with("..."));
        assert_eq!(sanitize_tool_error(""), "[TOOL_ERROR] ");
    }

    #[tokio::test]
    async fn credentials_in_any_tool_output_are_masked_before_the_model_sees_them() {
        let mut registry = ToolRegistry::new();
        registry.register(ToolEntry::new(
            "leaky",
            "test",
            json!({"description": "prints a token"}),
            handler(|_ctx, _args| async {
                Ok(
                    "DATABASE=postgres://hermes:pg-pass-123@db/h KEY=sk-live-abcdefghijklmnop"
                        .to_owned(),
                )
            }),
        ));
        let dir = tempfile::tempdir().unwrap();
        let out = registry
            .dispatch("leaky", "{}", ToolCtx::for_tests(dir.path()))
            .await;
        assert!(
            !out.contains("pg-pass-123") && !out.contains("abcdefghijklmnop"),
            "{out}"
        );
        assert!(out.contains("postgres://hermes:***@db/h"), "{out}");
    }

    #[test]
    fn arguments_must_be_a_json_object() {
        assert_eq!(parse_arguments("").unwrap(), json!({}));
        assert_eq!(parse_arguments("  ").unwrap(), json!({}));
        assert_eq!(parse_arguments(r#"{"a":1}"#).unwrap(), json!({"a": 1}));
        for bad in ["[1]", "\"x\"", "{broken", "3"] {
            let err: Value =
                serde_json::from_str(&parse_arguments(bad).unwrap_err().tool_result()).unwrap();
            assert_eq!(err["error"], "Invalid tool arguments", "{bad}");
        }
    }
}
