//! The operator's extra system text and the named personalities `/personality` picks from:
//! `agent.system_prompt` (or `HERMES_EPHEMERAL_SYSTEM_PROMPT`, which wins, as in Hermes), and
//! `agent.personalities` with the top-level `personalities:` as a fallback (Hermes's gateway
//! reads the first; its defaults carry the second). A personality is a prompt string, or a
//! mapping of `system_prompt` with optional `description`, `tone` and `style`.
//!
//! The text is layered onto each model request (never stored with the session), so a change
//! applies from the next message and the stored prompt stays byte-stable.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::Value;

use super::parse::{Issues, shown};

/// One named personality.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Personality {
    /// The text that becomes `agent.system_prompt` when chosen.
    pub prompt: String,
    /// What `/personality` lists beside the name.
    pub description: Option<String>,
}

/// The validated settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PersonalityConfig {
    /// Layered onto every model request of the gateway's chats (empty: none).
    pub system_prompt: String,
    pub personalities: BTreeMap<String, Personality>,
}

pub fn personality(
    issues: &mut Issues,
    system_prompt: Option<&Value>,
    agent_personalities: Option<&Value>,
    top_level: Option<&Value>,
    env: &BTreeMap<String, String>,
) -> PersonalityConfig {
    let configured = match system_prompt {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(text)) => text.trim().to_owned(),
        Some(other) => {
            issues.error(
                "agent.system_prompt",
                format!("expected text, got {}", shown(other)),
            );
            String::new()
        }
    };
    let system_prompt = env
        .get("HERMES_EPHEMERAL_SYSTEM_PROMPT")
        .filter(|text| !text.is_empty())
        .cloned()
        .unwrap_or(configured);
    let mut personalities = BTreeMap::new();
    // The agent section wins name by name.
    for (key, value) in [
        ("agent.personalities", agent_personalities),
        ("personalities", top_level),
    ] {
        for (name, personality) in named(issues, key, value) {
            personalities.entry(name).or_insert(personality);
        }
    }
    PersonalityConfig {
        system_prompt,
        personalities,
    }
}

fn named(issues: &mut Issues, key: &str, value: Option<&Value>) -> Vec<(String, Personality)> {
    let map = match value {
        None | Some(Value::Null) => return Vec::new(),
        Some(Value::Object(map)) => map,
        Some(other) => {
            issues.error(
                key,
                format!("expected a mapping of names, got {}", shown(other)),
            );
            return Vec::new();
        }
    };
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for (name, entry) in map {
        let at = format!("{key}.{name}");
        let lowered = name.trim().to_lowercase();
        if !seen.insert(lowered.clone()) {
            issues.warn(format!(
                "{at}: a personality of that name (any case) is already defined"
            ));
            continue;
        }
        let personality = match entry {
            Value::String(text) => Personality {
                prompt: text.trim().to_owned(),
                description: None,
            },
            Value::Object(fields) => {
                let field = |name: &str| {
                    fields
                        .get(name)
                        .and_then(Value::as_str)
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned)
                };
                for unknown in fields.keys().filter(|k| {
                    !["system_prompt", "description", "tone", "style"].contains(&k.as_str())
                }) {
                    issues.warn(format!("unknown key '{at}.{unknown}'"));
                }
                let mut parts: Vec<String> = field("system_prompt").into_iter().collect();
                if let Some(tone) = field("tone") {
                    parts.push(format!("Tone: {tone}"));
                }
                if let Some(style) = field("style") {
                    parts.push(format!("Style: {style}"));
                }
                Personality {
                    prompt: parts.join("\n"),
                    description: field("description"),
                }
            }
            other => {
                issues.error(
                    &at,
                    format!("expected a prompt or a mapping, got {}", shown(other)),
                );
                continue;
            }
        };
        if personality.prompt.is_empty() {
            issues.warn(format!("{at}: empty prompt; the personality is skipped"));
            continue;
        }
        out.push((lowered, personality));
    }
    out
}

impl PersonalityConfig {
    /// The personality `name` names (case-insensitive).
    pub fn get(&self, name: &str) -> Option<&Personality> {
        self.personalities.get(&name.trim().to_lowercase())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(
        system: Option<Value>,
        agent: Option<Value>,
        top: Option<Value>,
        env: &[(&str, &str)],
    ) -> (PersonalityConfig, Issues) {
        let mut issues = Issues::default();
        let env = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let config = personality(
            &mut issues,
            system.as_ref(),
            agent.as_ref(),
            top.as_ref(),
            &env,
        );
        (config, issues)
    }

    #[test]
    fn both_places_and_both_forms_are_read_the_agent_section_first() {
        let (config, issues) = read(
            Some(json!("  Be brief.  ")),
            Some(
                json!({"Pirate": {"system_prompt": "Talk like a pirate.", "tone": "salty",
                "style": "short", "description": "Arr"}, "kind": "Be kind."}),
            ),
            Some(json!({"pirate": "ignored: the agent section has it", "teacher": "Teach."})),
            &[],
        );
        assert!(issues.errors.is_empty(), "{:?}", issues.errors);
        assert_eq!(config.system_prompt, "Be brief.");
        let pirate = config.get("PIRATE").unwrap();
        assert_eq!(
            pirate.prompt,
            "Talk like a pirate.\nTone: salty\nStyle: short"
        );
        assert_eq!(pirate.description.as_deref(), Some("Arr"));
        assert_eq!(config.get("kind").unwrap().prompt, "Be kind.");
        assert_eq!(config.get("teacher").unwrap().prompt, "Teach.");
        assert_eq!(config.personalities.len(), 3);
    }

    #[test]
    fn the_environment_wins_and_bad_shapes_are_errors() {
        let (config, _) = read(
            Some(json!("from config")),
            None,
            None,
            &[("HERMES_EPHEMERAL_SYSTEM_PROMPT", "from env")],
        );
        assert_eq!(config.system_prompt, "from env");
        let (_, issues) = read(
            Some(json!(3)),
            Some(json!(["x"])),
            Some(json!({"a": 1})),
            &[],
        );
        let text = format!("{:?}", issues.errors);
        assert!(text.contains("agent.system_prompt"), "{text}");
        assert!(text.contains("agent.personalities"), "{text}");
        assert!(text.contains("personalities.a"), "{text}");
    }
}
