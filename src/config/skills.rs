//! `skills:` and `context_file_max_chars` — which skills of the home the agent may use on
//! each platform, extra read-only skill directories, and the cap on each context file
//! (SOUL.md, AGENTS.md, .hermes.md) entering the system prompt. Key names and meaning follow
//! Hermes 0.19.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::known_keys::warn_unknown;
use super::parse::{Issues, at, kind};
use super::shape::{Section, Unknown};

/// `skills.*` keys Hermes has that hermesd accepts without acting on them.
#[rustfmt::skip]
pub const IGNORED_SKILLS: &[&str] = &[
    "config", "inline_shell", "inline_shell_timeout", "write_approval",
];

/// `skills:` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct RawSkills {
    pub disabled: Option<Value>,
    pub platform_disabled: Option<Value>,
    pub external_dirs: Option<Value>,
    pub template_vars: Option<Value>,
    pub guard_agent_created: Option<Value>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

/// The validated `skills:` section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkillsConfig {
    /// Skill names hidden on every platform.
    pub disabled: Vec<String>,
    /// Per platform (`telegram`, `discord`, `cli`, ...), names hidden there as well.
    pub platform_disabled: BTreeMap<String, Vec<String>>,
    /// Directories scanned after `$HERMES_HOME/skills` (read-only: new skills go to the home).
    pub external_dirs: Vec<String>,
    /// `${HERMES_SKILL_DIR}` and `${HERMES_SESSION_ID}` in a loaded SKILL.md are filled in.
    pub template_vars: bool,
    /// Skills the agent writes with `skill_manage` are scanned, and refused on a critical
    /// finding.
    pub guard_agent_created: bool,
}

impl Default for SkillsConfig {
    fn default() -> Self {
        Self {
            disabled: Vec::new(),
            platform_disabled: BTreeMap::new(),
            external_dirs: Vec::new(),
            template_vars: true,
            guard_agent_created: false,
        }
    }
}

pub fn skills(issues: &mut Issues, section: Option<&Section<RawSkills>>) -> SkillsConfig {
    let raw = issues.section("skills", section).unwrap_or_default();
    warn_unknown(issues, "skills", &raw.unknown, &[IGNORED_SKILLS]);
    let mut platform_disabled = BTreeMap::new();
    match &raw.platform_disabled {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            for (platform, names) in map {
                let key = format!("skills.platform_disabled.{platform}");
                let names = issues.list(at(key, Some(names)), false).unwrap_or_default();
                platform_disabled.insert(platform.clone(), names);
            }
        }
        Some(other) => issues.error(
            "skills.platform_disabled",
            format!(
                "expected a mapping of platform to skill names, got {}",
                kind(other)
            ),
        ),
    }
    SkillsConfig {
        disabled: issues
            .list(at("skills.disabled", raw.disabled.as_ref()), false)
            .unwrap_or_default(),
        platform_disabled,
        external_dirs: issues
            .list(
                at("skills.external_dirs", raw.external_dirs.as_ref()),
                false,
            )
            .unwrap_or_default(),
        template_vars: issues.bool(at("skills.template_vars", raw.template_vars.as_ref()), true),
        guard_agent_created: issues.bool(
            at(
                "skills.guard_agent_created",
                raw.guard_agent_created.as_ref(),
            ),
            false,
        ),
    }
}

/// `context_file_max_chars`: `None` lets the cap follow the model's context window.
pub fn context_file_max_chars(issues: &mut Issues, value: Option<&Value>) -> Option<u64> {
    issues.opt_uint(at("context_file_max_chars", value), 1, 10_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn validate(value: Value) -> (SkillsConfig, Vec<String>) {
        let raw: RawSkills = serde_json::from_value(value).unwrap();
        let mut issues = Issues::default();
        let config = skills(&mut issues, Some(&Section::Map(raw)));
        (
            config,
            issues.errors.iter().map(|e| e.to_string()).collect(),
        )
    }

    #[test]
    fn lists_and_per_platform_lists_are_read_and_bad_shapes_name_the_key() {
        let (config, errors) = validate(json!({
            "disabled": ["a"],
            "platform_disabled": {"telegram": ["b", "c"], "discord": "d"},
            "external_dirs": ["/srv/skills"],
        }));
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(config.disabled, ["a"]);
        assert_eq!(config.platform_disabled["telegram"], ["b", "c"]);
        assert_eq!(config.platform_disabled["discord"], ["d"]);
        assert_eq!(config.external_dirs, ["/srv/skills"]);
        let (_, errors) = validate(json!({"platform_disabled": ["telegram"]}));
        assert!(
            errors.len() == 1 && errors[0].contains("skills.platform_disabled"),
            "{errors:?}"
        );
        let (_, errors) = validate(json!({"disabled": [{"x": 1}]}));
        assert!(errors[0].contains("skills.disabled[0]"), "{errors:?}");
    }
}
