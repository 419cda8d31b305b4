//! A job's `script`, run under the reference's rules: the file must resolve (symlinks
//! followed) inside `$HERMES_HOME/scripts/`; `.sh`/`.bash` run under bash and anything else
//! under `python3` from `PATH` (the reference uses its own interpreter, which a Rust daemon
//! does not have); the working directory is the script's own; the environment is the
//! terminal tool's (Hermes's secrets removed); the script and its children are stopped
//! after `cron.script_timeout_seconds`. Stdout, trimmed, is the result; a non-zero exit is
//! a failure that carries stderr. Each stream keeps at most `OUTPUT_CAP` bytes, so a chatty
//! script cannot fill the daemon's memory or a chat.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use rustix::process::Pid;

use crate::home::HermesHome;
use crate::process::{command_env, exit_code, find_bash, kill_group, read_capped};

/// Why a job's script gave no output to use. Its text is what the job's owner reads (in the
/// alert of a `no_agent` job, or handed to the agent to report).
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    #[error("cannot use {}: {source}", dir.display())]
    ScriptsDir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot create {}: {source}", dir.display())]
    CreateDir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("refused: the script {script:?} is outside {} (scripts must live there)", dir.display())]
    Outside { script: String, dir: PathBuf },
    #[error("the script {} does not exist", path.display())]
    Missing { path: PathBuf },
    #[error("the script {} is not a file", path.display())]
    NotAFile { path: PathBuf },
    #[error("cannot start {} for {}: {source}", interpreter.display(), path.display())]
    Start {
        interpreter: PathBuf,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the script {} was stopped after {seconds} s (cron.script_timeout_seconds)", path.display())]
    TimedOut { path: PathBuf, seconds: u64 },
    #[error("cannot wait for {}: {source}", path.display())]
    Wait {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A non-zero exit; the text carries the code, stderr and stdout.
    #[error("{0}")]
    Failed(String),
}

/// Bytes kept of each of stdout and stderr.
pub const OUTPUT_CAP: usize = 64 * 1024;

/// The script's file: inside `scripts_dir` once `~`, `..` and symlinks are resolved.
pub fn resolve(
    scripts_dir: &Path,
    script: &str,
    user_home: Option<&Path>,
) -> Result<PathBuf, ScriptError> {
    let dir = scripts_dir
        .canonicalize()
        .map_err(|source| ScriptError::ScriptsDir {
            dir: scripts_dir.to_path_buf(),
            source,
        })?;
    let script = script.trim();
    let raw = match (script.strip_prefix('~'), user_home) {
        (Some(rest), Some(home)) if rest.is_empty() || rest.starts_with('/') => {
            home.join(rest.trim_start_matches('/'))
        }
        _ => PathBuf::from(script),
    };
    let joined = if raw.is_absolute() {
        raw
    } else {
        dir.join(raw)
    };
    let resolved = joined.canonicalize().unwrap_or_else(|_| lexical(&joined));
    if !resolved.starts_with(&dir) {
        return Err(ScriptError::Outside {
            script: script.to_owned(),
            dir,
        });
    }
    if !resolved.exists() {
        return Err(ScriptError::Missing { path: resolved });
    }
    if !resolved.is_file() {
        return Err(ScriptError::NotAFile { path: resolved });
    }
    Ok(resolved)
}

/// `..` and `.` taken out without touching the disk (for a path that does not exist).
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// False when the last non-empty line of the output is a JSON object whose `wakeAgent` is
/// `false`: the script's way of saying there is nothing to report this time.
pub fn wakes_agent(output: &str) -> bool {
    let Some(last) = output.lines().rev().find(|l| !l.trim().is_empty()) else {
        return true;
    };
    match serde_json::from_str::<serde_json::Value>(last.trim()) {
        Ok(serde_json::Value::Object(gate)) => gate.get("wakeAgent") != Some(&false.into()),
        _ => true,
    }
}

/// The stream as text, trimmed, with a note when it was cut and secrets masked.
fn text(bytes: &[u8], total: usize, secrets: &[&str]) -> String {
    let mut text = String::from_utf8_lossy(bytes).trim().to_owned();
    if total > bytes.len() {
        text.push_str(&format!(
            "\n[output cut: {} of {total} bytes kept]",
            bytes.len()
        ));
    }
    for secret in secrets {
        text = text.replace(secret, "***");
    }
    text
}

/// Runs the job's script; `Ok(stdout)` on exit 0, `Err(why)` otherwise (the reason carries
/// stderr and stdout).
pub async fn run(
    home: &HermesHome,
    env: &BTreeMap<String, String>,
    script: &str,
    timeout: Duration,
) -> Result<String, ScriptError> {
    let scripts_dir = home.path().join("scripts");
    crate::home::private::create_dir_all(&scripts_dir).map_err(|source| {
        ScriptError::CreateDir {
            dir: scripts_dir.clone(),
            source,
        }
    })?;
    let user_home = env.get("HOME").map(PathBuf::from);
    let path = resolve(&scripts_dir, script, user_home.as_deref())?;
    let child_env = command_env(env, home);
    // What the child does not see is masked in what it prints (it could read a file).
    let secrets: Vec<&str> = env
        .iter()
        .filter(|(k, v)| !child_env.contains_key(*k) && v.len() >= 8)
        .map(|(_, v)| v.as_str())
        .collect();
    let shell = matches!(
        path.extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase)
            .as_deref(),
        Some("sh" | "bash")
    );
    let interpreter = if shell {
        find_bash(&child_env)
    } else {
        PathBuf::from("python3")
    };
    let mut child = tokio::process::Command::new(&interpreter)
        .arg(&path)
        .current_dir(path.parent().unwrap_or(&scripts_dir))
        .env_clear()
        .envs(&child_env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|source| ScriptError::Start {
            interpreter: interpreter.clone(),
            path: path.clone(),
            source,
        })?;
    let pgid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .and_then(Pid::from_raw);
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let finished = tokio::time::timeout(timeout, async {
        tokio::join!(
            read_capped(stdout, OUTPUT_CAP),
            read_capped(stderr, OUTPUT_CAP),
            child.wait()
        )
    })
    .await;
    let Ok(((out, out_total), (err, err_total), status)) = finished else {
        kill_group(&mut child, pgid).await;
        return Err(ScriptError::TimedOut {
            path,
            seconds: timeout.as_secs(),
        });
    };
    let stdout = text(&out, out_total, &secrets);
    let stderr = text(&err, err_total, &secrets);
    let status = status.map_err(|source| ScriptError::Wait {
        path: path.clone(),
        source,
    })?;
    if status.success() {
        return Ok(stdout);
    }
    let mut why = format!("the script exited with code {}", exit_code(status));
    for (name, stream) in [("stderr", &stderr), ("stdout", &stdout)] {
        if !stream.is_empty() {
            why.push_str(&format!("\n{name}:\n{stream}"));
        }
    }
    Err(ScriptError::Failed(why))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_must_resolve_inside_the_scripts_directory() {
        let home = tempfile::tempdir().unwrap();
        let scripts = home.path().join("scripts");
        std::fs::create_dir_all(scripts.join("sub")).unwrap();
        std::fs::write(scripts.join("sub/ok.py"), "print(1)").unwrap();
        std::fs::write(home.path().join("secret.py"), "print(2)").unwrap();
        std::os::unix::fs::symlink(home.path().join("secret.py"), scripts.join("link.py")).unwrap();
        let dir = scripts.canonicalize().unwrap();
        assert_eq!(
            resolve(&scripts, "sub/ok.py", None).unwrap(),
            dir.join("sub/ok.py")
        );
        let absolute = dir.join("sub/ok.py").display().to_string();
        assert!(resolve(&scripts, &absolute, None).is_ok());
        for outside in [
            "../secret.py",
            "link.py",
            "/etc/passwd",
            "sub/../../secret.py",
        ] {
            let e = resolve(&scripts, outside, None).unwrap_err().to_string();
            assert!(e.starts_with("refused"), "{outside}: {e}");
        }
        assert!(
            resolve(&scripts, "~/x.py", Some(home.path()))
                .unwrap_err()
                .to_string()
                .starts_with("refused")
        );
        assert!(
            resolve(&scripts, "missing.py", None)
                .unwrap_err()
                .to_string()
                .contains("does not exist")
        );
        assert!(
            resolve(&scripts, "sub", None)
                .unwrap_err()
                .to_string()
                .contains("not a file")
        );
    }

    #[test]
    fn the_wake_gate_is_the_last_line() {
        assert!(wakes_agent(""));
        assert!(wakes_agent("data\n{\"wakeAgent\": true}"));
        assert!(!wakes_agent("data\n{\"wakeAgent\": false}\n\n"));
        assert!(wakes_agent("{\"wakeAgent\": false}\nmore"));
        assert!(wakes_agent("[false]"));
    }
}
