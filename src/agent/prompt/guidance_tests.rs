//! Which guidance block goes to which model, toolset and platform.

use super::*;

fn tools(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

fn has(blocks: &[&str], text: &str) -> bool {
    blocks.contains(&text)
}

#[test]
fn no_tools_no_guidance() {
    let config = PromptConfig {
        tool_use_enforcement: ToolUseEnforcement::Always,
        ..PromptConfig::default()
    };
    assert!(blocks(&config, &[], "gpt-4o").is_empty());
}

#[test]
fn general_blocks_follow_their_switches_and_tool_lines_follow_the_tools() {
    let config = PromptConfig::default();
    let plain = blocks(&config, &tools(&["terminal"]), "claude-sonnet-4");
    assert_eq!(plain, vec![TASK_COMPLETION, PARALLEL_CALLS]);
    let all = blocks(
        &config,
        &tools(&["memory", "session_search", "skill_manage"]),
        "claude-sonnet-4",
    );
    assert_eq!(
        all,
        vec![
            TASK_COMPLETION,
            PARALLEL_CALLS,
            MEMORY_TOOL,
            SESSION_SEARCH_TOOL,
            SKILL_MANAGE_TOOL
        ]
    );
    let off = PromptConfig {
        task_completion_guidance: false,
        parallel_tool_call_guidance: false,
        ..PromptConfig::default()
    };
    assert_eq!(blocks(&off, &tools(&["memory"]), "x"), vec![MEMORY_TOOL]);
}

#[test]
fn auto_enforcement_picks_model_families() {
    let config = PromptConfig::default();
    let t = tools(&["terminal"]);
    // (model, enforcement, Google notes, OpenAI notes)
    let cases = [
        ("claude-sonnet-4", false, false, false),
        ("anthropic/claude-opus-4", false, false, false),
        ("gpt-4o", true, false, true),
        ("openai/GPT-5-codex", true, false, true),
        ("x-ai/grok-4", true, false, true),
        ("google/gemini-2.5-pro", true, true, false),
        ("gemma-3-27b", true, true, false),
        ("qwen3-coder", true, false, false),
        ("deepseek-chat", true, false, false),
        ("glm-4.6", true, false, false),
        ("llama-3.3-70b", false, false, false),
    ];
    for (model, enforce, google, openai) in cases {
        let got = blocks(&config, &t, model);
        assert_eq!(has(&got, ENFORCEMENT), enforce, "{model}");
        assert_eq!(has(&got, GOOGLE_FAMILY), google, "{model}");
        assert_eq!(has(&got, OPENAI_FAMILY), openai, "{model}");
    }
}

#[test]
fn enforcement_setting_overrides_the_family_list() {
    let t = tools(&["terminal"]);
    let with = |e| PromptConfig {
        tool_use_enforcement: e,
        ..PromptConfig::default()
    };
    assert!(has(
        &blocks(&with(ToolUseEnforcement::Always), &t, "claude-sonnet-4"),
        ENFORCEMENT
    ));
    let never = blocks(&with(ToolUseEnforcement::Never), &t, "gpt-4o");
    assert!(!has(&never, ENFORCEMENT) && !has(&never, OPENAI_FAMILY));
    let listed = with(ToolUseEnforcement::Models(vec!["llama".into()]));
    assert!(has(&blocks(&listed, &t, "Llama-3.3-70B"), ENFORCEMENT));
    assert!(!has(&blocks(&listed, &t, "gpt-4o"), ENFORCEMENT));
    // A listed GPT model also gets the family notes, as in Hermes.
    let gpt = with(ToolUseEnforcement::Models(vec!["gpt".into()]));
    assert!(has(&blocks(&gpt, &t, "gpt-4o"), OPENAI_FAMILY));
}

#[test]
fn platform_hints_default_replace_and_append() {
    let mut config = PromptConfig::default();
    assert!(
        platform_hint(&config, "telegram")
            .unwrap()
            .contains("Telegram")
    );
    assert!(
        platform_hint(&config, "api_server")
            .unwrap()
            .contains("plain text")
    );
    assert_eq!(platform_hint(&config, "subagent"), None);
    config.platform_hints.insert(
        "telegram".into(),
        HintOverride {
            replace: None,
            append: Some("Answer in French.".into()),
        },
    );
    config.platform_hints.insert(
        "discord".into(),
        HintOverride {
            replace: Some("Short replies.".into()),
            append: Some("No emoji.".into()),
        },
    );
    config.platform_hints.insert(
        "matrix".into(),
        HintOverride {
            replace: None,
            append: Some("Matrix room.".into()),
        },
    );
    let telegram = platform_hint(&config, "telegram").unwrap();
    assert!(telegram.starts_with("You are talking to the user in Telegram"));
    assert!(telegram.ends_with("\n\nAnswer in French."));
    assert_eq!(
        platform_hint(&config, "discord").unwrap(),
        "Short replies.\n\nNo emoji."
    );
    assert_eq!(
        platform_hint(&config, "matrix").as_deref(),
        Some("Matrix room.")
    );
    // Other platforms keep their defaults.
    assert!(platform_hint(&config, "slack").unwrap().contains("Slack"));
}
