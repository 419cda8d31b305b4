//! Stamps the git revision into the binary for `hermesd --version`.
//!
//! `HERMESD_GIT_REV` wins when set (the Dockerfile passes it as a build argument, because the
//! image build sees no `.git`); otherwise `git rev-parse --short HEAD`; otherwise `unknown`.
//! Nothing here may fail the build: a source tarball without git must still compile.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=HERMESD_GIT_REV");
    let revision = std::env::var("HERMESD_GIT_REV")
        .ok()
        .map(|rev| rev.trim().to_owned())
        .filter(|rev| !rev.is_empty())
        .or_else(git_revision)
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=HERMESD_GIT_REV={revision}");
    watch_git_head();
    // `sqlx::migrate!` embeds these files; a build script that names what it watches turns
    // off cargo's "any file changed" rule, so a new or edited migration must be named here
    // or the binary keeps the old set (sqlx's documented build-script line).
    println!("cargo:rerun-if-changed=src/state/postgres/migrations");
}

fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git").args(args).output().ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8(output.stdout).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

fn git_revision() -> Option<String> {
    let revision = git(&["rev-parse", "--short", "HEAD"])?;
    let clean = revision
        .chars()
        .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase());
    clean.then_some(revision)
}

/// Re-runs this script when HEAD moves (a commit, a checkout), and only then: without
/// `rerun-if-changed` lines cargo would re-run it, and rebuild the crate, on any file change.
/// In a worktree `HEAD` lives in the worktree's git dir and branch refs in the common dir.
fn watch_git_head() {
    let Some(git_dir) = git(&["rev-parse", "--git-dir"]).map(PathBuf::from) else {
        // Not a checkout: watch this script alone so the result is cached.
        println!("cargo:rerun-if-changed=build.rs");
        return;
    };
    let common_dir = git(&["rev-parse", "--git-common-dir"])
        .map(PathBuf::from)
        .unwrap_or_else(|| git_dir.clone());
    let mut watched = vec![git_dir.join("HEAD"), common_dir.join("packed-refs")];
    if let Some(branch_ref) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.push(common_dir.join(branch_ref));
    }
    // A missing file would make cargo re-run the script on every build.
    for path in watched.iter().filter(|path| path.exists()) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}
