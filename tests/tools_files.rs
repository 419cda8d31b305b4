//! The file tools on real files: pagination and line numbers, binary and secret guards,
//! writes that keep line endings and refuse broken JSON, patch uniqueness and V4A, search,
//! and confinement to the allowed roots — including `..` escapes and real symlinks.

use std::path::Path;

use hermesd::tools::{ToolCtx, builtin_registry};
use serde_json::{Value, json};

async fn run(ctx: &ToolCtx, tool: &str, args: Value) -> Value {
    let out = builtin_registry()
        .dispatch(tool, &args.to_string(), ctx.clone())
        .await;
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

/// A workspace `root/work` (the only allowed root) next to `root/outside`.
struct Fixture {
    _dir: tempfile::TempDir,
    work: std::path::PathBuf,
    outside: std::path::PathBuf,
    ctx: ToolCtx,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let work = root.join("work");
    let outside = root.join("outside");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "top secret\n").unwrap();
    let ctx = ToolCtx::for_tests(&work);
    Fixture {
        _dir: dir,
        work,
        outside,
        ctx,
    }
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

#[tokio::test]
async fn read_file_paginates_with_line_numbers() {
    let f = fixture();
    let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    write(&f.work.join("ten.txt"), &text);
    let all = run(&f.ctx, "read_file", json!({"path": "ten.txt"})).await;
    assert_eq!(all["total_lines"], 10);
    assert_eq!(all["truncated"], false);
    assert_eq!(all["file_size"], text.len());
    assert!(
        all["content"]
            .as_str()
            .unwrap()
            .starts_with("1|line 1\n2|line 2\n")
    );
    let page = run(
        &f.ctx,
        "read_file",
        json!({"path": "ten.txt", "offset": 4, "limit": 3}),
    )
    .await;
    assert_eq!(page["content"], "4|line 4\n5|line 5\n6|line 6");
    assert_eq!(page["truncated"], true);
    assert_eq!(page["hint"], "Lines 4-6 of 10; offset=7 reads on");
    let strings = run(
        &f.ctx,
        "read_file",
        json!({"path": "ten.txt", "offset": "9", "limit": "5"}),
    )
    .await;
    assert_eq!(strings["content"], "9|line 9\n10|line 10");

    write(&f.work.join("bom.txt"), "\u{feff}first\r\nsecond");
    let bom = run(&f.ctx, "read_file", json!({"path": "bom.txt"})).await;
    assert_eq!(bom["content"], "1|first\n2|second");

    let mut budget = f.ctx.clone();
    budget.limits.max_read_chars = 20;
    let cut = run(&budget, "read_file", json!({"path": "ten.txt"})).await;
    assert_eq!(cut["content"], "1|line 1\n2|line 2");
    assert_eq!(cut["truncated_by"], "bytes");
    assert_eq!(cut["next_offset"], 3);
    let mut narrow = f.ctx.clone();
    narrow.limits.max_line_length = 4;
    let long = run(&narrow, "read_file", json!({"path": "ten.txt", "limit": 1})).await;
    assert_eq!(long["content"], "1|line... [truncated]");
}

#[tokio::test]
async fn read_file_refuses_binaries_secrets_and_suggests_names() {
    let f = fixture();
    write(&f.work.join("config.yaml"), "a: 1\n");
    let missing = run(&f.ctx, "read_file", json!({"path": "config.yml"})).await;
    assert_eq!(missing["error"], "File not found: config.yml");
    assert_eq!(missing["similar_files"], json!(["./config.yaml"]));
    std::fs::write(f.work.join("blob.dat2"), [0u8, 1, 2, 3, 0, 0, 9, 0]).unwrap();
    let binary = run(&f.ctx, "read_file", json!({"path": "blob.dat2"})).await;
    assert_eq!(binary["is_binary"], true);
    assert!(
        binary["error"]
            .as_str()
            .unwrap()
            .starts_with("Binary content, not shown")
    );
    write(&f.work.join("logo.png"), "not really");
    let png = run(&f.ctx, "read_file", json!({"path": "logo.png"})).await;
    assert!(
        png["error"]
            .as_str()
            .unwrap()
            .starts_with("'logo.png' is a binary file (.png)")
    );
    write(&f.work.join(".env"), "API_KEY=sk-123\n");
    let env = run(&f.ctx, "read_file", json!({"path": ".env"})).await;
    assert!(
        env["error"]
            .as_str()
            .unwrap()
            .contains("is an environment file and likely holds secrets")
    );
    let dir = run(&f.ctx, "read_file", json!({"path": "."})).await;
    assert!(dir["error"].as_str().unwrap().contains("is a directory"));
}

#[tokio::test]
async fn paths_outside_the_roots_are_refused_including_through_symlinks() {
    let f = fixture();
    let secret = f.outside.join("secret.txt");
    for path in [
        secret.display().to_string(),
        "../outside/secret.txt".into(),
        "/etc/hostname".into(),
    ] {
        let read = run(&f.ctx, "read_file", json!({"path": path})).await;
        assert!(
            read["error"]
                .as_str()
                .unwrap()
                .starts_with("Access denied:"),
            "{path}: {read}"
        );
    }
    // A symlink to a file outside, to a directory outside, and a dangling one.
    std::os::unix::fs::symlink(&secret, f.work.join("link.txt")).unwrap();
    std::os::unix::fs::symlink(&f.outside, f.work.join("linkdir")).unwrap();
    std::os::unix::fs::symlink(f.outside.join("new.txt"), f.work.join("dangling.txt")).unwrap();
    for path in ["link.txt", "linkdir/secret.txt"] {
        let read = run(&f.ctx, "read_file", json!({"path": path})).await;
        assert!(
            read["error"]
                .as_str()
                .unwrap()
                .starts_with("Access denied:"),
            "{path}: {read}"
        );
    }
    for path in [
        "link.txt",
        "linkdir/planted.txt",
        "dangling.txt",
        "../outside/planted.txt",
    ] {
        let written = run(
            &f.ctx,
            "write_file",
            json!({"path": path, "content": "pwned"}),
        )
        .await;
        assert!(written["error"].is_string(), "{path}: {written}");
    }
    let patched = run(
        &f.ctx,
        "patch",
        json!({"path": "link.txt", "old_string": "top", "new_string": "no"}),
    )
    .await;
    assert!(patched["error"].is_string(), "{patched}");
    let searched = run(
        &f.ctx,
        "search_files",
        json!({"pattern": "secret", "path": "linkdir"}),
    )
    .await;
    assert!(
        searched["error"]
            .as_str()
            .unwrap()
            .starts_with("Access denied:"),
        "{searched}"
    );
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "top secret\n");
    assert!(!f.outside.join("planted.txt").exists() && !f.outside.join("new.txt").exists());
    // A symlink that stays inside the root is fine.
    write(&f.work.join("real.txt"), "inside\n");
    std::os::unix::fs::symlink(f.work.join("real.txt"), f.work.join("alias.txt")).unwrap();
    assert_eq!(
        run(&f.ctx, "read_file", json!({"path": "alias.txt"})).await["content"],
        "1|inside"
    );
    // And so is `..` that stays inside.
    std::fs::create_dir(f.work.join("sub")).unwrap();
    assert_eq!(
        run(&f.ctx, "read_file", json!({"path": "sub/../real.txt"})).await["content"],
        "1|inside"
    );
}

#[tokio::test]
async fn write_file_creates_dirs_keeps_crlf_and_refuses_bad_json() {
    let f = fixture();
    let created = run(
        &f.ctx,
        "write_file",
        json!({"path": "a/b/new.txt", "content": "hello\nworld\n"}),
    )
    .await;
    let resolved = f.work.join("a/b/new.txt");
    assert_eq!(created["bytes_written"], 12);
    assert_eq!(created["dirs_created"], true);
    assert_eq!(
        created["files_modified"],
        json!([resolved.display().to_string()])
    );
    assert_eq!(
        std::fs::read_to_string(&resolved).unwrap(),
        "hello\nworld\n"
    );

    write(&f.work.join("win.txt"), "one\r\ntwo\r\n");
    run(
        &f.ctx,
        "write_file",
        json!({"path": "win.txt", "content": "uno\ndos\n"}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(f.work.join("win.txt")).unwrap(),
        "uno\r\ndos\r\n"
    );

    let bad = run(
        &f.ctx,
        "write_file",
        json!({"path": "data.json", "content": "{\"a\": "}),
    )
    .await;
    assert!(
        bad["error"]
            .as_str()
            .unwrap()
            .starts_with("Not written: the content for 'data.json' is not valid .json")
    );
    assert!(!f.work.join("data.json").exists());
    let numbered = run(
        &f.ctx,
        "write_file",
        json!({"path": "x.py", "content": "1|import os\n2|print(1)\n"}),
    )
    .await;
    assert!(
        numbered["error"]
            .as_str()
            .unwrap()
            .starts_with("Not written: this is read_file output")
    );
    let missing = run(&f.ctx, "write_file", json!({"path": "x.txt"})).await;
    assert!(
        missing["error"]
            .as_str()
            .unwrap()
            .starts_with("write_file: 'content' is missing")
    );
    let config = run(&f.ctx, "write_file", json!({"path": f.ctx.home.config_yaml().display().to_string(), "content": "approvals: {mode: off}\n"})).await;
    assert!(
        config["error"]
            .as_str()
            .unwrap()
            .starts_with("Not written:")
            && config["error"]
                .as_str()
                .unwrap()
                .contains("is the Hermes configuration"),
        "{config}"
    );
}

#[tokio::test]
async fn patch_requires_a_unique_match_and_reports_a_diff() {
    let f = fixture();
    write(&f.work.join("a.txt"), "alpha\nbeta\nalpha\n");
    let resolved = f.work.join("a.txt").display().to_string();
    let ambiguous = run(
        &f.ctx,
        "patch",
        json!({"path": "a.txt", "old_string": "alpha", "new_string": "gamma"}),
    )
    .await;
    assert_eq!(
        ambiguous,
        json!({"success": false, "error": "old_string occurs 2 times. Add surrounding text until it occurs once, or set replace_all=true."})
    );
    let ok = run(
        &f.ctx,
        "patch",
        json!({"mode": "replace", "path": "a.txt", "old_string": "beta", "new_string": "delta"}),
    )
    .await;
    assert_eq!(ok["success"], true);
    assert_eq!(
        ok["diff"],
        format!(
            "--- a/{resolved}\n+++ b/{resolved}\n@@ -1,3 +1,3 @@\n alpha\n-beta\n+delta\n alpha\n"
        )
    );
    assert_eq!(ok["files_modified"], json!([resolved]));
    let missing = run(
        &f.ctx,
        "patch",
        json!({"path": "a.txt", "old_string": "zzz", "new_string": "y"}),
    )
    .await;
    assert_eq!(missing["error"], "old_string does not occur in the file");
    assert!(
        missing["_hint"]
            .as_str()
            .unwrap()
            .starts_with("The file may have changed")
    );
    let all = run(
        &f.ctx,
        "patch",
        json!({"path": "a.txt", "old_string": "alpha", "new_string": "omega", "replace_all": true}),
    )
    .await;
    assert_eq!(all["success"], true);
    assert_eq!(
        std::fs::read_to_string(f.work.join("a.txt")).unwrap(),
        "omega\ndelta\nomega\n"
    );
    let no_args = run(&f.ctx, "patch", json!({"path": "a.txt"})).await;
    assert_eq!(no_args["error"], "old_string and new_string required");
}

#[tokio::test]
async fn v4a_patches_apply_all_or_nothing() {
    let f = fixture();
    write(&f.work.join("a.txt"), "one\ntwo\nthree\n");
    write(&f.work.join("old.txt"), "bye\n");
    let patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n one\n-two\n+TWO\n*** Add File: docs/new.md\n+# Title\n+body\n*** Delete File: old.txt\n*** End Patch";
    let applied = run(&f.ctx, "patch", json!({"mode": "patch", "patch": patch})).await;
    assert_eq!(applied["success"], true, "{applied}");
    assert_eq!(
        std::fs::read_to_string(f.work.join("a.txt")).unwrap(),
        "one\nTWO\nthree\n"
    );
    assert_eq!(
        std::fs::read_to_string(f.work.join("docs/new.md")).unwrap(),
        "# Title\nbody"
    );
    assert!(!f.work.join("old.txt").exists());
    assert_eq!(applied["files_created"], json!(["docs/new.md"]));
    assert_eq!(applied["files_deleted"], json!(["old.txt"]));

    let failing = "*** Begin Patch\n*** Update File: a.txt\n-TWO\n+2\n*** Update File: a.txt\n-missing\n+x\n*** End Patch";
    let refused = run(&f.ctx, "patch", json!({"mode": "patch", "patch": failing})).await;
    assert_eq!(refused["success"], false);
    assert!(refused["error"].as_str().unwrap().starts_with("Patch validation failed (no files were modified):\n  • a.txt: hunk 1 (no hint) not found"), "{refused}");
    assert_eq!(
        std::fs::read_to_string(f.work.join("a.txt")).unwrap(),
        "one\nTWO\nthree\n"
    );
    let traversal = run(
        &f.ctx,
        "patch",
        json!({"mode": "patch", "patch": "*** Add File: ../outside/x\n+y"}),
    )
    .await;
    assert!(
        traversal["error"]
            .as_str()
            .unwrap()
            .contains("climbs out with '..'")
    );
}

#[tokio::test]
async fn search_finds_content_and_files_with_caps() {
    let f = fixture();
    std::fs::create_dir_all(f.work.join("src/.hidden")).unwrap();
    write(
        &f.work.join("src/main.rs"),
        "fn main() {\n    println!(\"hi\");\n}\n",
    );
    write(&f.work.join("src/lib.rs"), "pub fn hi() {}\n// hi again\n");
    write(&f.work.join("src/.hidden/x.rs"), "hi hidden\n");
    write(&f.work.join("notes.md"), "hi\n");
    let content = run(
        &f.ctx,
        "search_files",
        json!({"pattern": "hi", "path": "src", "file_glob": "*.rs"}),
    )
    .await;
    assert_eq!(content["total_count"], 3);
    assert_eq!(
        content["matches"],
        json!([
            {"path": "src/lib.rs", "line": 1, "content": "pub fn hi() {}"},
            {"path": "src/lib.rs", "line": 2, "content": "// hi again"},
            {"path": "src/main.rs", "line": 2, "content": "    println!(\"hi\");"},
        ])
    );
    let counts = run(
        &f.ctx,
        "search_files",
        json!({"pattern": "hi", "output_mode": "count"}),
    )
    .await;
    assert_eq!(
        counts["counts"],
        json!({"./notes.md": 1, "./src/lib.rs": 2, "./src/main.rs": 1})
    );
    let files_only = run(
        &f.ctx,
        "search_files",
        json!({"pattern": "fn", "output_mode": "files_only"}),
    )
    .await;
    assert_eq!(
        files_only["files"],
        json!(["./src/lib.rs", "./src/main.rs"])
    );
    let capped = run(&f.ctx, "search_files", json!({"pattern": "hi", "limit": 1})).await;
    assert_eq!(capped["matches"].as_array().unwrap().len(), 1);
    assert_eq!(capped["truncated"], true);
    assert_eq!(
        capped["hint"],
        "More results exist: offset=1 shows the next page; a tighter pattern or file_glob gives fewer."
    );
    let names = run(
        &f.ctx,
        "search_files",
        json!({"pattern": "*.rs", "target": "files"}),
    )
    .await;
    assert_eq!(names["total_count"], 2);
    let bad = run(&f.ctx, "search_files", json!({"pattern": "(unclosed"})).await;
    assert!(
        bad["error"]
            .as_str()
            .unwrap()
            .starts_with("Search failed: regex parse error")
    );
    let gone = run(
        &f.ctx,
        "search_files",
        json!({"pattern": "x", "path": "nowhere"}),
    )
    .await;
    assert_eq!(gone["error"], "Path not found: nowhere");
}
