//! A skill written by our `skill_manage` is read by the Python Hermes 0.19.0's own skill
//! loader (`skills_list`, `skill_view`, the slash-command scan and the prompt index), and
//! our `skill_view` returns the same body the reference does.

mod support;

use hermesd::tools::{ToolCtx, builtin_registry};
use serde_json::{Value, json};

const PY_READ: &str = r#"
import json
from tools.skills_tool import skills_list, skill_view
from agent.skill_commands import scan_skill_commands
from agent.prompt_builder import build_skills_system_prompt
print(json.dumps({
    "list": json.loads(skills_list()),
    "view": json.loads(skill_view("harbour-log")),
    "file": json.loads(skill_view("harbour-log", file_path="references/format.md")),
    "commands": sorted(scan_skill_commands().keys()),
    "index": build_skills_system_prompt(),
}))
"#;

const SKILL: &str = "---\nname: harbour-log\ndescription: Keep the harbour's ship log\ntags: [sea, log]\n---\n# Harbour log\n\nWrite one line per ship: time, name, direction.\n";

async fn manage(ctx: &ToolCtx, args: Value) -> Value {
    let registry = builtin_registry();
    let out = registry
        .dispatch("skill_manage", &args.to_string(), ctx.clone())
        .await;
    let out: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(out["success"], true, "{args}: {out}");
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn a_skill_written_by_skill_manage_loads_in_the_python_reference() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolCtx::for_tests(dir.path());
    manage(
        &ctx,
        json!({"action": "create", "name": "harbour-log", "category": "sea", "content": SKILL}),
    )
    .await;
    manage(
        &ctx,
        json!({"action": "write_file", "name": "harbour-log", "file_path": "references/format.md", "file_content": "HH:MM name in|out"}),
    )
    .await;
    manage(
        &ctx,
        json!({"action": "patch", "name": "harbour-log", "old_string": "direction.", "new_string": "direction, flag."}),
    )
    .await;

    let py = support::python::run(PY_READ, &[], ctx.home.path(), "");
    let listed = &py["list"]["skills"];
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{py}");
    assert_eq!(listed[0]["name"], "harbour-log");
    assert_eq!(listed[0]["category"], "sea");
    assert_eq!(listed[0]["description"], "Keep the harbour's ship log");
    assert_eq!(py["view"]["success"], true, "{py}");
    assert!(
        py["view"]["content"]
            .as_str()
            .unwrap()
            .contains("direction, flag."),
        "{py}"
    );
    assert_eq!(py["view"]["tags"], json!(["sea", "log"]));
    assert_eq!(py["file"]["content"], "HH:MM name in|out", "{py}");
    assert_eq!(py["commands"], json!(["/harbour-log"]));
    assert!(
        py["index"]
            .as_str()
            .unwrap()
            .contains("- harbour-log: Keep the harbour's ship log"),
        "{py}"
    );

    // Our reader sees what the reference sees.
    let ours = builtin_registry()
        .dispatch("skill_view", r#"{"name": "harbour-log"}"#, ctx.clone())
        .await;
    let ours: Value = serde_json::from_str(&ours).unwrap();
    assert_eq!(ours["content"], py["view"]["content"]);
    assert_eq!(ours["linked_files"], json!(["references/format.md"]));
}
