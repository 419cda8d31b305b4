//! `approvals.deny` in config.yaml (a Hermes key): globs of commands the agent never runs,
//! checked before every bypass (`approvals.mode: off` included) over every spelling the
//! parser finds, through the real terminal tool.

use std::collections::BTreeMap;
use std::sync::Arc;

use hermesd::home::HermesHome;
use hermesd::tools::approval::{ApprovalGate, ApprovalSettings};
use hermesd::tools::{ToolCtx, builtin_registry};
use serde_json::{Value, json};

#[tokio::test]
async fn deny_globs_from_config_block_commands_even_with_approvals_off() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let home = HermesHome::at(root.join("hermes"));
    std::fs::create_dir_all(home.path()).unwrap();
    std::fs::write(
        home.config_yaml(),
        "approvals:\n  mode: off\n  deny:\n    - 'touch *'\n",
    )
    .unwrap();
    let env = BTreeMap::from([("HOME".to_owned(), root.display().to_string())]);
    let loaded = hermesd::config::load(&home, &env).expect("config loads");
    let mut ctx = ToolCtx::for_tests(&root);
    ctx.approvals = Arc::new(ApprovalGate::new(
        ApprovalSettings::from_config(&loaded.config, &home, &env),
        None,
    ));
    let registry = builtin_registry();
    for command in [
        "touch denied-1",
        "t\\ouch denied-2",
        "bash -c 'touch denied-3'",
    ] {
        let out = registry
            .dispatch(
                "terminal",
                &json!({ "command": command }).to_string(),
                ctx.clone(),
            )
            .await;
        let result: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(result["status"], "blocked", "{command}: {result}");
        let error = result["error"].as_str().unwrap_or_default();
        assert!(
            error.contains("'touch *'") && error.contains("approvals.deny"),
            "{command}: {error}"
        );
    }
    for n in 1..=3 {
        assert!(
            !root.join(format!("denied-{n}")).exists(),
            "denied-{n} was created"
        );
    }
    // Everything else still runs without asking (mode off).
    let out = registry
        .dispatch(
            "terminal",
            &json!({ "command": "echo fine" }).to_string(),
            ctx.clone(),
        )
        .await;
    assert!(out.contains("fine"), "{out}");
}
