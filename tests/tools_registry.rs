//! The registry: dispatch always yields well-formed JSON (bad arguments, unknown tools,
//! handler errors and panics), `check_fn` runs once per distinct function per call and
//! hides tools when false or panicking, toolset filtering, and the built-in set.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use hermesd::tools::registry::{ToolEntry, ToolRegistry, check_fn, handler};
use hermesd::tools::{AGENT_LEVEL_TOOLS, ToolCtx, ToolError, builtin_registry};
use serde_json::{Value, json};

fn schema(name: &str) -> Value {
    json!({"name": name, "description": format!("{name} tool"),
        "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}}})
}

fn echo_entry(name: &str, toolset: &str) -> ToolEntry {
    ToolEntry::new(
        name,
        toolset,
        schema(name),
        handler(|_ctx: ToolCtx, args: Value| async move { Ok::<_, ToolError>(args.to_string()) }),
    )
}

fn parse(result: &str) -> Value {
    serde_json::from_str(result).unwrap_or_else(|e| panic!("not JSON ({e}): {result}"))
}

#[tokio::test]
async fn dispatch_wraps_every_failure_as_json() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolCtx::for_tests(dir.path());
    let mut registry = ToolRegistry::new();
    registry.register(echo_entry("echo", "demo"));
    registry.register(ToolEntry::new(
        "fails",
        "demo",
        schema("fails"),
        handler(|_ctx: ToolCtx, _args: Value| async move {
            Err::<String, _>(ToolError::Failed("disk on fire".into()))
        }),
    ));
    registry.register(ToolEntry::new(
        "panics_async",
        "demo",
        schema("panics_async"),
        handler(|_ctx: ToolCtx, _args: Value| async move {
            if true {
                panic!("boom inside");
            }
            Ok::<_, ToolError>(String::new())
        }),
    ));
    registry.register(ToolEntry::new(
        "panics_sync",
        "demo",
        schema("panics_sync"),
        Arc::new(
            |_ctx: ToolCtx, _args: Value| -> hermesd::tools::registry::ToolFuture {
                panic!("boom before the future")
            },
        ),
    ));

    // Arguments are coerced to the schema's types on the way in.
    assert_eq!(
        parse(
            &registry
                .dispatch("echo", r#"{"n": "7"}"#, ctx.clone())
                .await
        ),
        json!({"n": 7})
    );
    assert_eq!(
        parse(&registry.dispatch("echo", "", ctx.clone()).await),
        json!({})
    );

    let unknown = parse(&registry.dispatch("nope", "{}", ctx.clone()).await);
    assert_eq!(unknown, json!({"error": "Unknown tool: nope"}));

    for bad in ["{not json", "[1, 2]", "\"str\""] {
        let invalid = parse(&registry.dispatch("echo", bad, ctx.clone()).await);
        assert_eq!(invalid["error"], "Invalid tool arguments", "{bad}");
        assert_eq!(
            invalid["message"],
            "The arguments were not a JSON object, so the tool did not run."
        );
    }

    let failed = parse(&registry.dispatch("fails", "{}", ctx.clone()).await);
    assert_eq!(
        failed["error"],
        "[TOOL_ERROR] Tool execution failed: ToolFailed: disk on fire"
    );
    for name in ["panics_async", "panics_sync"] {
        let panicked = parse(&registry.dispatch(name, "{}", ctx.clone()).await);
        let text = panicked["error"].as_str().unwrap();
        assert!(
            text.starts_with("[TOOL_ERROR] Tool execution failed: panic: boom"),
            "{text}"
        );
    }
}

#[tokio::test]
async fn check_fns_run_once_per_call_and_hide_tools() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolCtx::for_tests(dir.path());
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = {
        let calls = Arc::clone(&calls);
        check_fn(move |_| {
            calls.fetch_add(1, Ordering::SeqCst);
            true
        })
    };
    let mut registry = ToolRegistry::new();
    for name in ["a", "b", "c"] {
        registry.register(echo_entry(name, "shared").with_check(Arc::clone(&counted)));
    }
    registry.register(echo_entry("hidden", "shared").with_check(check_fn(|_| false)));
    registry
        .register(echo_entry("broken", "shared").with_check(check_fn(|_| panic!("probe crashed"))));
    registry.register(echo_entry("plain", "other"));

    let names = |defs: &[Value]| -> Vec<String> {
        defs.iter()
            .map(|d| d["function"]["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let defs = registry.definitions(None, &[], &ctx);
    assert_eq!(names(&defs), ["a", "b", "c", "plain"]);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "one shared check_fn runs once per call"
    );
    assert_eq!(defs[0]["type"], "function");
    assert_eq!(defs[0]["function"]["description"], "a tool");

    registry.definitions(None, &[], &ctx);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "and again on the next call (no stale cache)"
    );

    let only_other = registry.definitions(Some(&["other".to_owned()]), &[], &ctx);
    assert_eq!(names(&only_other), ["plain"]);
    let without_shared = registry.definitions(None, &["shared".to_owned()], &ctx);
    assert_eq!(names(&without_shared), ["plain"]);
}

#[tokio::test]
async fn a_later_registration_replaces_an_earlier_one() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolCtx::for_tests(dir.path());
    let mut registry = ToolRegistry::new();
    registry.register(echo_entry("dup", "first"));
    registry.register(ToolEntry::new(
        "dup",
        "second",
        schema("dup"),
        handler(|_ctx: ToolCtx, _args: Value| async move { Ok::<_, ToolError>("second".into()) }),
    ));
    assert_eq!(registry.get("dup").unwrap().toolset, "second");
    assert_eq!(registry.dispatch("dup", "{}", ctx).await, "second");
}

#[tokio::test]
async fn the_builtin_registry_serves_presets_and_stubs_agent_level_tools() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolCtx::for_tests(dir.path());
    let registry = builtin_registry();
    let names: Vec<String> = registry
        .definitions(Some(&["hermes-telegram".to_owned()]), &[], &ctx)
        .iter()
        .map(|d| d["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    // session_search is hidden: this context has no state store.
    assert_eq!(
        names,
        [
            "clarify",
            "delegate_task",
            "memory",
            "patch",
            "process",
            "read_file",
            "search_files",
            "skill_manage",
            "skill_view",
            "skills_list",
            "terminal",
            "todo",
            "write_file"
        ]
    );
    let api: Vec<String> = registry
        .definitions(Some(&["hermes-api-server".to_owned()]), &[], &ctx)
        .iter()
        .map(|d| d["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(!api.contains(&"clarify".to_owned()));
    let no_terminal: Vec<String> = registry
        .definitions(
            Some(&["hermes-cli".to_owned()]),
            &["terminal".to_owned()],
            &ctx,
        )
        .iter()
        .map(|d| d["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        !no_terminal.contains(&"terminal".to_owned())
            && !no_terminal.contains(&"process".to_owned())
    );
    assert!(no_terminal.contains(&"read_file".to_owned()));
    // A composite toolset takes its included toolsets' tools away too.
    let no_debugging: Vec<String> = registry
        .definitions(None, &["debugging".to_owned()], &ctx)
        .iter()
        .map(|d| d["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        no_debugging,
        [
            "clarify",
            "delegate_task",
            "memory",
            "skill_manage",
            "skill_view",
            "skills_list",
            "todo"
        ]
    );

    for name in AGENT_LEVEL_TOOLS {
        let result = parse(&registry.dispatch(name, "{}", ctx.clone()).await);
        assert_eq!(
            result["error"],
            format!("{name} runs inside the agent loop, not through the tool registry")
        );
    }
    assert!(registry.is_interactive("clarify"));
    assert!(!registry.is_interactive("terminal"));
    assert_eq!(registry.emoji("terminal"), "💻");
    assert_eq!(registry.emoji("unknown"), "⚡");
}

#[tokio::test]
async fn clarify_asks_through_the_callback() {
    let dir = tempfile::tempdir().unwrap();
    let mut ctx = ToolCtx::for_tests(dir.path());
    let registry = builtin_registry();
    let args = r#"{"question": "Which target?", "choices": ["staging", {"label": "prod"}]}"#;

    let unavailable = parse(&registry.dispatch("clarify", args, ctx.clone()).await);
    assert_eq!(
        unavailable["error"],
        "No user can be asked from here, so clarify is unavailable."
    );

    let seen = Arc::new(std::sync::Mutex::new(None));
    let recorder = Arc::clone(&seen);
    ctx.clarify = Some(Arc::new(
        move |request: hermesd::tools::clarify::ClarifyRequest| {
            *recorder.lock().unwrap() = Some(request);
            Box::pin(async { Ok::<_, hermesd::tools::clarify::ClarifyError>(" prod ".to_owned()) })
        },
    ));
    let answered = parse(&registry.dispatch("clarify", args, ctx.clone()).await);
    assert_eq!(
        answered,
        json!({"question": "Which target?", "choices_offered": ["staging", "prod"], "user_response": "prod"})
    );
    let request = seen.lock().unwrap().clone().unwrap();
    assert_eq!(request.session_id, "test-session");

    ctx.clarify = Some(Arc::new(|_| {
        Box::pin(async { Err::<String, _>(hermesd::tools::clarify::ClarifyError::Cancelled) })
    }));
    let failed = parse(&registry.dispatch("clarify", args, ctx).await);
    assert_eq!(
        failed["error"],
        "Failed to get user input: the question was cancelled"
    );
}

/// Dynamic (MCP) tools: selected by their server's toolset, its bare name or `mcp`; a
/// built-in keeps its name; a list change is seen by the next lookup.
#[tokio::test]
async fn overlay_tools_join_toolsets_and_never_shadow_a_built_in() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolCtx::for_tests(dir.path());
    let overlay = hermesd::tools::ToolOverlay::new();
    let mut registry = ToolRegistry::new();
    registry.register(echo_entry("builtin", "demo"));
    let registry = registry.with_overlay(overlay.clone());
    overlay.set_group(
        "gh#1",
        vec![
            echo_entry("mcp__gh__search", "mcp-gh"),
            echo_entry("builtin", "mcp-gh"),
        ],
    );
    let names = |enabled: Option<&[String]>, disabled: &[String]| -> Vec<String> {
        registry
            .definitions(enabled, disabled, &ctx)
            .iter()
            .map(|d| d["function"]["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let list = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    assert_eq!(names(None, &[]), ["builtin", "mcp__gh__search"]);
    for selector in ["mcp", "gh", "mcp-gh"] {
        assert_eq!(
            names(Some(&list(&[selector])), &[]),
            ["mcp__gh__search"],
            "{selector}"
        );
    }
    assert_eq!(names(None, &list(&["mcp"])), ["builtin"]);
    assert_eq!(registry.get("builtin").unwrap().toolset, "demo");
    let result = registry
        .dispatch("mcp__gh__search", r#"{"n": 1}"#, ctx.clone())
        .await;
    assert_eq!(parse(&result), json!({"n": 1}));
    overlay.remove_group("gh#1");
    let gone = registry
        .dispatch("mcp__gh__search", "{}", ctx.clone())
        .await;
    assert!(
        parse(&gone)["error"]
            .as_str()
            .unwrap()
            .contains("Unknown tool")
    );
}
