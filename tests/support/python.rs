//! The Python Hermes 0.19.0 (the reference implementation), for interoperability tests.
//!
//! `HERMES_PYTHON` names a python with `hermes-agent==0.19.0` installed; otherwise
//! `.ci/python-reference` installs one into `target/hermes-py` (once, under a file lock).

use std::path::Path;
use std::process::{Command, Stdio};

pub fn python() -> String {
    if let Ok(python) = std::env::var("HERMES_PYTHON") {
        return python;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/python-reference");
    let output = Command::new("bash")
        .arg(&script)
        .stderr(Stdio::inherit())
        .output()
        .expect("run .ci/python-reference");
    assert!(
        output.status.success(),
        "installing the Python reference (hermes-agent==0.19.0 from PyPI) failed; \
         set HERMES_PYTHON to a python that has it"
    );
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

/// Runs `script` with the reference python, feeding `stdin`; returns stdout as JSON.
pub fn run(script: &str, args: &[&str], home: &Path, stdin: &str) -> serde_json::Value {
    use std::io::Write;
    let mut child = Command::new(python())
        .arg("-c")
        .arg(script)
        .args(args)
        .env("HERMES_HOME", home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn python");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "python failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "python printed no JSON ({e}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}
