//! The commands against temporary homes: what they print and the exit codes they return.

use std::collections::BTreeMap;

use super::{check_to, show_to};
use crate::config::EXIT_CONFIG;
use crate::home::HermesHome;

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .collect()
}

/// A temporary home holding the given `config.yaml` and `.env` (when non-empty).
fn home_with(config_yaml: &str, dotenv: &str) -> (tempfile::TempDir, HermesHome) {
    let dir = tempfile::tempdir().unwrap();
    if !config_yaml.is_empty() {
        std::fs::write(dir.path().join("config.yaml"), config_yaml).unwrap();
    }
    if !dotenv.is_empty() {
        std::fs::write(dir.path().join(".env"), dotenv).unwrap();
    }
    let home = HermesHome::at(dir.path());
    (dir, home)
}

#[test]
fn show_redacts_every_secret() {
    let yaml = "\
model:
  api_key: model-key-SECRET
fallback_providers:
  - {provider: openrouter, model: x/y, api_key: fallback-SECRET}
platforms:
  telegram:
    enabled: true
    token: yaml-token-SECRET
    extra: {webhook_secret: extra-SECRET, require_mention: true}
";
    let (_dir, home) = home_with(yaml, "DISCORD_BOT_TOKEN=dotenv-token-SECRET\n");
    let process = env(&[
        ("SLACK_BOT_TOKEN", "xoxb-SECRET"),
        ("SLACK_APP_TOKEN", "xapp-SECRET"),
        ("API_SERVER_KEY", "api-server-key-SECRET"),
        ("OPENAI_API_KEY", "sk-SECRET"),
    ]);
    for json in [false, true] {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        assert_eq!(show_to(&home, &process, json, &mut out, &mut err), 0);
        let out = String::from_utf8(out).unwrap();
        assert!(!out.contains("SECRET"), "{out}");
        assert!(out.contains("***"));
        assert!(out.contains("require_mention"));
        if json {
            let parsed: serde_json::Value = serde_json::from_str(&out).unwrap();
            assert_eq!(parsed["platforms"]["telegram"]["token"], "***");
            assert_eq!(parsed["api_server"]["enabled"], true);
        } else {
            let parsed: serde_json::Value = serde_norway::from_str(&out).unwrap();
            assert_eq!(parsed["approvals"]["timeout"], 60);
        }
    }
}

#[test]
fn check_prints_ok_or_every_error() {
    let (_dir, home) = home_with("telegram: {tokn: x}\n", "");
    let (mut out, mut err) = (Vec::new(), Vec::new());
    assert_eq!(check_to(&home, &BTreeMap::new(), &mut out, &mut err), 0);
    assert_eq!(String::from_utf8(out).unwrap(), "config ok\n");
    assert_eq!(
        String::from_utf8(err).unwrap(),
        "warning: unknown key 'telegram.tokn'\n"
    );

    let (_dir, home) = home_with(
        "approvals: {timeout: 0}\nstreaming: {edit_interval: -1}\n",
        "",
    );
    let (mut out, mut err) = (Vec::new(), Vec::new());
    assert_eq!(
        check_to(&home, &BTreeMap::new(), &mut out, &mut err),
        EXIT_CONFIG
    );
    assert!(out.is_empty());
    assert_eq!(
        String::from_utf8(err).unwrap(),
        "config error: approvals.timeout: must be at least 1, got 0\n\
         config error: streaming.edit_interval: must be greater than 0 and at most 31536000 (one year), got -1\n"
    );
}
