//! Running one hook command: split into words (never through a shell), started in its own
//! process group with the secret-free command environment, the payload written to stdin,
//! stdout and stderr kept up to [`OUTPUT_CAP`] bytes each, and the whole group killed when
//! the timeout passes.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use rustix::process::Pid;
use tokio::io::AsyncWriteExt;

use super::allowlist::expand_tilde;
use crate::process::{exit_code, kill_group, read_capped};

/// What a hook may print on each stream before the rest is dropped.
pub const OUTPUT_CAP: usize = 64 * 1024;

/// How a hook run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunOutcome {
    Exited {
        code: i32,
        stdout: String,
        stderr: String,
    },
    /// Killed, with its process group, when the timeout passed.
    TimedOut,
    /// It could not be started (missing program, not executable, bad quoting).
    NotStarted(String),
}

/// Runs `command` with `stdin` as its input. `env` is the complete environment it gets
/// (already stripped of secrets by the caller); a leading `~` in a word is the user's home.
pub async fn run(
    command: &str,
    stdin: &str,
    env: &BTreeMap<String, String>,
    cwd: &Path,
    timeout: Duration,
) -> RunOutcome {
    let Some(words) = shlex::split(command).filter(|w| !w.is_empty()) else {
        return RunOutcome::NotStarted("the command cannot be split into words".to_owned());
    };
    let user_home = env.get("HOME").map(Path::new);
    let argv: Vec<_> = words.iter().map(|w| expand_tilde(w, user_home)).collect();
    let cwd = if cwd.is_dir() { cwd } else { Path::new("/") };
    let spawned = tokio::process::Command::new(&argv[0])
        .args(&argv[1..])
        .current_dir(cwd)
        .env_clear()
        .envs(env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(error) => return RunOutcome::NotStarted(error.to_string()),
    };
    let pgid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .and_then(Pid::from_raw);
    let (input, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let payload = stdin.as_bytes().to_vec();
    let feed = async move {
        if let Some(mut input) = input {
            // A hook that does not read its input may close it early: that is its choice.
            let _ = input.write_all(&payload).await;
            let _ = input.shutdown().await;
        }
    };
    let finished = tokio::time::timeout(timeout, async {
        let ((), out, err, status) = tokio::join!(
            feed,
            read_capped(stdout, OUTPUT_CAP),
            read_capped(stderr, OUTPUT_CAP),
            child.wait()
        );
        (out, err, status)
    })
    .await;
    let Ok(((out, _), (err, _), status)) = finished else {
        kill_group(&mut child, pgid).await;
        return RunOutcome::TimedOut;
    };
    match status {
        Ok(status) => RunOutcome::Exited {
            code: exit_code(status),
            stdout: String::from_utf8_lossy(&out).into_owned(),
            stderr: String::from_utf8_lossy(&err).into_owned(),
        },
        Err(error) => RunOutcome::NotStarted(error.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> BTreeMap<String, String> {
        BTreeMap::from([("PATH".to_owned(), "/usr/bin:/bin".to_owned())])
    }

    #[tokio::test]
    async fn the_payload_reaches_stdin_and_stdout_comes_back() {
        let outcome = run(
            "sh -c 'cat; echo \" $0\"' 'no shell: quotes are words'",
            "{\"a\":1}",
            &env(),
            Path::new("/"),
            Duration::from_secs(30),
        )
        .await;
        assert_eq!(
            outcome,
            RunOutcome::Exited {
                code: 0,
                stdout: "{\"a\":1} no shell: quotes are words\n".to_owned(),
                stderr: String::new(),
            }
        );
    }

    #[tokio::test]
    async fn shell_syntax_is_not_interpreted() {
        let outcome = run(
            "echo a; touch /tmp/never && echo $HOME",
            "",
            &env(),
            Path::new("/"),
            Duration::from_secs(30),
        )
        .await;
        let RunOutcome::Exited { stdout, .. } = outcome else {
            panic!("{outcome:?}");
        };
        assert_eq!(stdout, "a; touch /tmp/never && echo $HOME\n");
    }

    #[tokio::test]
    async fn a_missing_program_is_reported_not_started() {
        let outcome = run(
            "/nonexistent/hook",
            "",
            &env(),
            Path::new("/"),
            Duration::from_secs(30),
        )
        .await;
        assert!(matches!(outcome, RunOutcome::NotStarted(_)), "{outcome:?}");
    }

    #[tokio::test]
    async fn a_hanging_hook_and_its_children_are_killed_at_the_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let script = format!(
            "sleep 600 & echo $! > {}; wait",
            crate::process::shell_quote(&pid_file.display().to_string())
        );
        let command = format!("sh -c {}", crate::process::shell_quote(&script));
        let outcome = run(&command, "", &env(), dir.path(), Duration::from_secs(2)).await;
        assert_eq!(outcome, RunOutcome::TimedOut);
        let pid: i32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let alive = rustix::process::test_kill_process(Pid::from_raw(pid).unwrap()).is_ok();
        assert!(!alive, "the hook's child {pid} outlived the timeout");
    }
}
