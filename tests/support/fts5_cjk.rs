//! Builds the tiny FTS5 tokenizer the CJK-index tests load into Hermes's Python code
//! (`tests/fixtures/fts5_cjk/fts5_cjk.c`, registered as `cjk_unicode61`), with the system's C
//! compiler and SQLite's extension headers (`.ci/test` installs both when missing).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Compiles the tokenizer into `home/lib/libfts5_cjk.so`, where Hermes looks for it, and
/// returns that path.
pub fn build_into(home: &Path) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fts5_cjk/fts5_cjk.c");
    let lib = home.join("lib");
    std::fs::create_dir_all(&lib).unwrap();
    let out = lib.join("libfts5_cjk.so");
    let built = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o"])
        .arg(&out)
        .arg(&source)
        .output()
        .expect("run cc (install gcc; .ci/test does)");
    assert!(
        built.status.success(),
        "building {} failed (needs libsqlite3-dev's sqlite3ext.h; .ci/test installs it):\n{}",
        source.display(),
        String::from_utf8_lossy(&built.stderr)
    );
    out
}
