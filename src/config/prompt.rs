//! The settings that pick the guidance blocks of the system prompt: `agent.tool_use_enforcement`,
//! `agent.task_completion_guidance`, `agent.parallel_tool_call_guidance` and the per-platform
//! `platform_hints` overrides. Key names, value forms and defaults follow Hermes 0.19.

use std::collections::BTreeMap;

use serde::{Serialize, Serializer};
use serde_json::Value;

use super::parse::{Issues, at, kind, shown};
use super::raw::{RawAgent, Section};

/// `agent.tool_use_enforcement`: when the "call your tools, don't announce them" block goes
/// into the prompt.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ToolUseEnforcement {
    /// Models whose name contains one of the families known to need it.
    #[default]
    Auto,
    Always,
    Never,
    /// Models whose name contains one of these (case-insensitive).
    Models(Vec<String>),
}

impl Serialize for ToolUseEnforcement {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Auto => s.serialize_str("auto"),
            Self::Always => s.serialize_bool(true),
            Self::Never => s.serialize_bool(false),
            Self::Models(names) => names.serialize(s),
        }
    }
}

/// `platform_hints.<platform>`: a bare string (added after the built-in hint) or a mapping
/// with `replace` (instead of it) and/or `append` (after it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HintOverride {
    pub replace: Option<String>,
    pub append: Option<String>,
}

/// The validated prompt-guidance settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PromptConfig {
    pub tool_use_enforcement: ToolUseEnforcement,
    pub task_completion_guidance: bool,
    pub parallel_tool_call_guidance: bool,
    pub platform_hints: BTreeMap<String, HintOverride>,
}

impl Default for PromptConfig {
    fn default() -> Self {
        Self {
            tool_use_enforcement: ToolUseEnforcement::Auto,
            task_completion_guidance: true,
            parallel_tool_call_guidance: true,
            platform_hints: BTreeMap::new(),
        }
    }
}

pub fn prompt(
    issues: &mut Issues,
    agent: Option<&Section<RawAgent>>,
    hints: Option<&Value>,
) -> PromptConfig {
    let defaults = PromptConfig::default();
    // A malformed `agent:` is reported once, by the agent section itself.
    let agent = match agent {
        Some(Section::Map(agent)) => agent.clone(),
        _ => RawAgent::default(),
    };
    PromptConfig {
        tool_use_enforcement: enforcement(issues, agent.tool_use_enforcement.as_ref()),
        task_completion_guidance: issues.bool(
            at(
                "agent.task_completion_guidance",
                agent.task_completion_guidance.as_ref(),
            ),
            defaults.task_completion_guidance,
        ),
        parallel_tool_call_guidance: issues.bool(
            at(
                "agent.parallel_tool_call_guidance",
                agent.parallel_tool_call_guidance.as_ref(),
            ),
            defaults.parallel_tool_call_guidance,
        ),
        platform_hints: platform_hints(issues, hints),
    }
}

fn enforcement(issues: &mut Issues, value: Option<&Value>) -> ToolUseEnforcement {
    const KEY: &str = "agent.tool_use_enforcement";
    match value {
        None | Some(Value::Null) => ToolUseEnforcement::Auto,
        Some(Value::Bool(true)) => ToolUseEnforcement::Always,
        Some(Value::Bool(false)) => ToolUseEnforcement::Never,
        Some(Value::String(text)) => match text.trim().to_ascii_lowercase().as_str() {
            "auto" | "" => ToolUseEnforcement::Auto,
            "true" | "always" | "yes" | "on" => ToolUseEnforcement::Always,
            "false" | "never" | "no" | "off" => ToolUseEnforcement::Never,
            _ => {
                issues.error(
                    KEY,
                    format!(
                        "expected auto, true, false or a list of model-name parts, got {}",
                        shown(&Value::String(text.clone()))
                    ),
                );
                ToolUseEnforcement::Auto
            }
        },
        Some(list @ Value::Array(_)) => ToolUseEnforcement::Models(
            issues
                .list(at(KEY, Some(list)), false)
                .unwrap_or_default()
                .into_iter()
                .map(|name| name.to_lowercase())
                .collect(),
        ),
        Some(other) => {
            issues.error(
                KEY,
                format!(
                    "expected auto, true, false or a list of model-name parts, got {}",
                    kind(other)
                ),
            );
            ToolUseEnforcement::Auto
        }
    }
}

fn platform_hints(issues: &mut Issues, value: Option<&Value>) -> BTreeMap<String, HintOverride> {
    let mut out = BTreeMap::new();
    let map = match value {
        None | Some(Value::Null) => return out,
        Some(Value::Object(map)) => map,
        Some(other) => {
            issues.error(
                "platform_hints",
                format!(
                    "expected a mapping of platform to hint text, got {}",
                    kind(other)
                ),
            );
            return out;
        }
    };
    for (platform, spec) in map {
        let key = format!("platform_hints.{platform}");
        let parsed = match spec {
            Value::Null => continue,
            Value::String(_) => HintOverride {
                replace: None,
                append: issues.string(at(key.clone(), Some(spec))),
            },
            Value::Object(fields) => {
                for field in fields.keys() {
                    if field != "replace" && field != "append" {
                        issues.warn(format!(
                            "{key}.{field} is not a hint setting (only replace and append); ignored"
                        ));
                    }
                }
                HintOverride {
                    replace: issues.string(at(format!("{key}.replace"), fields.get("replace"))),
                    append: issues.string(at(format!("{key}.append"), fields.get("append"))),
                }
            }
            other => {
                issues.error(
                    key,
                    format!(
                        "expected hint text or a mapping with replace/append, got {}",
                        kind(other)
                    ),
                );
                continue;
            }
        };
        out.insert(platform.to_lowercase(), parsed);
    }
    out
}
