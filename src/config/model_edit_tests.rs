//! In-place edits of `model:` keep everything but the value, byte for byte.

use super::*;

const COMMENTED: &str = concat!(
    "# My Hermes config — hand written\n",
    "\n",
    "model:\n",
    "  # the one I like best\n",
    "  default: \"anthropic/claude-sonnet-4\"   # change me\n",
    "  provider: openrouter\n",
    "  context_length: 200000\n",
    "\n",
    "# keep approvals strict\n",
    "approvals:\n",
    "  mode: manual   # never auto\n",
);

#[test]
fn a_block_default_changes_and_nothing_else() {
    let out = set_model_keys(COMMENTED, &[("default", "openai/gpt-4o")]).unwrap();
    assert_eq!(
        out,
        COMMENTED.replace("\"anthropic/claude-sonnet-4\"", "openai/gpt-4o")
    );
}

#[test]
fn a_scalar_model_changes_in_place() {
    let text = "model: gpt-4o  # default\nagent:\n  max_turns: 5\n";
    assert_eq!(
        set_model_keys(text, &[("default", "gpt-4o-mini")]).unwrap(),
        "model: gpt-4o-mini  # default\nagent:\n  max_turns: 5\n"
    );
}

#[test]
fn other_keys_are_replaced_or_added_to_the_block() {
    let out = set_model_keys(
        COMMENTED,
        &[
            ("default", "llama3"),
            ("provider", "custom"),
            ("base_url", "http://127.0.0.1:8080/v1"),
        ],
    )
    .unwrap();
    assert!(
        out.starts_with(
            "# My Hermes config — hand written\n\nmodel:\n  base_url: http://127.0.0.1:8080/v1\n  # the one I like best\n  default: llama3   # change me\n  provider: custom\n"
        ),
        "{out}"
    );
    assert!(out.ends_with("# keep approvals strict\napprovals:\n  mode: manual   # never auto\n"));
    // A scalar becomes a block when more than the name is set.
    let out = set_model_keys("model: a\n", &[("default", "b"), ("provider", "groq")]).unwrap();
    assert_eq!(out, "model:\n  default: b\n  provider: groq\n");
}

#[test]
fn a_missing_model_or_file_gets_a_block() {
    assert_eq!(
        set_model_keys("", &[("default", "m")]).unwrap(),
        "model:\n  default: m\n"
    );
    assert_eq!(
        set_model_keys("agent:\n  max_turns: 3", &[("default", "m")]).unwrap(),
        "agent:\n  max_turns: 3\nmodel:\n  default: m\n"
    );
}

#[test]
fn values_that_need_quotes_get_them() {
    let out = set_model_keys("model: a\n", &[("default", "true")]).unwrap();
    assert_eq!(out, "model: \"true\"\n");
    let out = set_model_keys("model: a\n", &[("default", "x # y")]).unwrap();
    assert_eq!(out, "model: \"x # y\"\n");
}

#[test]
fn layouts_it_cannot_edit_are_refused_untouched() {
    for text in [
        "model: {default: a, provider: b}\n",
        "model: &m a\n",
        "model:\n  default: >\n    folded\n",
        "model:\n  default:\n    nested: 1\n",
        "model: a\nmodel: b\n",
        "model:\n\tdefault: a\n",
    ] {
        assert!(
            set_model_keys(text, &[("default", "x")]).is_err(),
            "{text:?} was edited"
        );
    }
}

#[test]
fn crlf_files_keep_their_line_ends() {
    let text = "model:\r\n  default: a # c\r\nagent:\r\n  max_turns: 2\r\n";
    assert_eq!(
        set_model_keys(text, &[("default", "b")]).unwrap(),
        "model:\r\n  default: b # c\r\nagent:\r\n  max_turns: 2\r\n"
    );
}

#[test]
fn other_sections_take_a_key_in_place_or_a_new_block() {
    let text = "model: gpt-4o\nagent:\n  max_turns: 5  # keep\n";
    let prompt = "Talk like a pirate.\nTone: salty";
    assert_eq!(
        set_section_keys(text, "agent", &[("system_prompt", prompt)]).unwrap(),
        "model: gpt-4o\nagent:\n  system_prompt: \"Talk like a pirate.\\nTone: salty\"\n  max_turns: 5  # keep\n"
    );
    let set = "agent:\n  system_prompt: old  # chosen by /personality\n";
    assert_eq!(
        set_section_keys(set, "agent", &[("system_prompt", "")]).unwrap(),
        "agent:\n  system_prompt: \"\"  # chosen by /personality\n"
    );
    assert_eq!(
        set_section_keys("model: m\n", "agent", &[("system_prompt", "x")]).unwrap(),
        "model: m\nagent:\n  system_prompt: x\n"
    );
    // Only `model` may be a bare name.
    assert!(set_section_keys("agent: x\n", "agent", &[("system_prompt", "y")]).is_err());
}
