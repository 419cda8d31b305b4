//! Keeps `config/KEYS.md`, the table of every key hermesd accepts (implemented, or accepted
//! but not supported yet), in step with the code: implemented keys are the keys
//! `config/default.yaml` documents; the others come from the lists in `known_keys` and
//! `unsupported`. On a mismatch the test prints the table the code implies.

use serde_json::Value;

use super::known_keys::*;
use super::unsupported::VALIDATED_NOT_HONOURED;

const KEYS_MD: &str = include_str!("../../config/KEYS.md");
const DEFAULT_YAML: &str = include_str!("../../config/default.yaml");

/// Where each list of accepted-but-ignored keys sits in the config tree.
const IGNORED_LISTS: &[(&str, &[&str])] = &[
    ("", IGNORED_TOP_LEVEL),
    ("", OTHER_PLATFORMS),
    ("agent", IGNORED_AGENT),
    ("approvals", IGNORED_APPROVALS),
    ("compression", IGNORED_COMPRESSION),
    ("cron", IGNORED_CRON),
    ("display", IGNORED_DISPLAY),
    ("display.platforms.*", IGNORED_DISPLAY_PLATFORM),
    ("fallback_providers[]", IGNORED_FALLBACK),
    ("gateway", IGNORED_GATEWAY),
    ("mcp_servers.*", IGNORED_MCP_SERVER),
    ("mcp_servers.*.sampling", IGNORED_MCP_SAMPLING),
    ("model", IGNORED_MODEL),
    ("platforms.*", IGNORED_PLATFORM),
    ("platforms.*.home_channel", IGNORED_HOME_CHANNEL),
    ("platforms.api_server", IGNORED_API_SERVER),
    ("session_reset", IGNORED_SESSION_RESET),
    ("browser", &["*"]),
    ("security", super::web::IGNORED_SECURITY),
    ("skills", super::skills::IGNORED_SKILLS),
    ("terminal", super::terminal::IGNORED_TERMINAL),
    ("tts", super::speech::IGNORED_TTS),
    ("voice", super::speech::IGNORED_VOICE),
];

/// Implemented keys that `default.yaml` cannot document without overriding their section:
/// Hermes's other spellings of `stt` (read in `media.rs`).
const IMPLEMENTED_SPELLINGS: &[&str] = &[
    "gateway.stt",
    "gateway.stt_echo_transcripts",
    "stt_echo_transcripts",
    "stt_enabled",
];

fn leaves(prefix: &str, value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, child) in map {
                let path = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                leaves(&path, child, out);
            }
        }
        _ => out.push(prefix.to_owned()),
    }
}

fn rows() -> Vec<(String, &'static str)> {
    let defaults: Value = serde_norway::from_str(DEFAULT_YAML).unwrap();
    let mut implemented = Vec::new();
    leaves("", &defaults, &mut implemented);
    let mut rows: Vec<(String, &str)> = implemented
        .into_iter()
        .map(|key| (key, "implemented"))
        .collect();
    for (prefix, list) in IGNORED_LISTS {
        for key in *list {
            let path = if prefix.is_empty() {
                (*key).to_owned()
            } else {
                format!("{prefix}.{key}")
            };
            rows.push((path, "accepted, not supported yet"));
        }
    }
    for key in IMPLEMENTED_SPELLINGS {
        rows.push(((*key).to_owned(), "implemented"));
    }
    for key in VALIDATED_NOT_HONOURED {
        rows.push(((*key).to_owned(), "validated, not supported yet"));
    }
    rows.sort();
    rows.dedup();
    rows
}

fn table() -> String {
    let mut text = String::from(
        "# Configuration keys hermesd accepts\n\n\
         Generated from the code (`src/config/key_table.rs` checks it; on a mismatch its test \
         prints\nthe new table). *implemented*: the key takes effect (documented in \
         `default.yaml`).\n*validated, not supported yet*: a bad value is still an error, but \
         nothing acts on it yet.\n*accepted, not supported yet*: a Hermes key hermesd takes \
         without acting on it, so a\nHermes `config.yaml` loads unchanged. Every key of the \
         last two kinds that a configuration\nsets is named in one warning (\"not supported by \
         hermesd yet\") by `config check`, `doctor`\nand the daemon's start-up log; `config \
         check --strict` fails on it. `*` is any platform\nname; Hermes platforms hermesd has \
         no adapter for are accepted at the top level, under\n`platforms:` and under \
         `gateway:`.\n\n| key | status |\n|---|---|\n",
    );
    for (key, status) in rows() {
        text.push_str(&format!("| `{key}` | {status} |\n"));
    }
    text
}

#[test]
fn keys_md_is_the_table_the_code_implies() {
    let expected = table();
    assert!(
        KEYS_MD == expected,
        "config/KEYS.md is out of date; the code implies:\n{expected}"
    );
}

#[test]
fn no_key_is_both_implemented_and_ignored() {
    let rows = rows();
    for pair in rows.windows(2) {
        assert_ne!(pair[0].0, pair[1].0, "{:?} vs {:?}", pair[0], pair[1]);
    }
}
