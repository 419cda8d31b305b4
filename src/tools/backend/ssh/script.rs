//! The shell text sent over SSH. An exec request is run by the remote user's login shell
//! (`$SHELL -c '<text>'`), so everything we pass is one POSIX `sh -c` line whose arguments
//! are single-quoted: the login shell only strips the quotes and nothing of the model's
//! script or of a variable's value is interpreted twice.
//!
//! A command runs under bash when the machine has it (else sh), in a process group of its
//! own (`setsid`, else bash's job control), with its stderr joined to its stdout on the
//! remote side; its script arrives on stdin, never in a command line. The wrapper's own stderr carries one line: the group's id, so a timeout or
//! an interrupt can kill the whole group over a second channel.

use std::collections::BTreeMap;

/// The first line the wrapper writes on stderr: `hermesd-pgid:<pid>`.
pub const PGID_MARKER: &str = "hermesd-pgid:";

/// Exit code of a read for a file that does not exist.
pub const MISSING_FILE_EXIT: u32 = 44;

/// `text` as one single-quoted shell word.
pub use crate::process::shell_quote as quote;

/// A shell word for `path` on the remote machine. `~` and `~/…` name the remote home (the
/// remote shell expands `$HOME`); other relative paths are relative to `cwd` (itself
/// absolute, `~` or `~/…`; a relative `cwd` is taken from the remote home, where an exec
/// starts).
pub fn remote_path(cwd: &str, path: &str) -> String {
    if path.starts_with('/') {
        return quote(path);
    }
    if path == "~" {
        return "\"$HOME\"".to_owned();
    }
    if let Some(rest) = path.strip_prefix("~/") {
        return format!("\"$HOME\"{}", quote(&format!("/{rest}")));
    }
    if cwd.is_empty() || cwd == "." {
        return quote(&format!("./{path}"));
    }
    let joined = format!("{}/{path}", cwd.trim_end_matches('/'));
    if joined.starts_with('/') || joined.starts_with("~/") {
        remote_path("", &joined)
    } else {
        quote(&format!("./{joined}"))
    }
}

/// Whether `name` may be exported by a POSIX shell.
pub fn valid_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// The script bash (or sh) runs: change into `cwd`, export `env`, then the caller's script.
/// A variable name a shell cannot export is an error naming it.
pub fn inner_script(
    cwd: &str,
    env: &BTreeMap<String, String>,
    script: &str,
) -> Result<String, String> {
    let mut text = String::new();
    if !cwd.is_empty() {
        text.push_str(&format!("cd {} || exit 1\n", remote_path("", cwd)));
    }
    for (name, value) in env {
        if !valid_env_name(name) {
            return Err(format!(
                "environment variable name {name:?} cannot be set over ssh (letters, digits and _ only, not starting with a digit)"
            ));
        }
        text.push_str(&format!("export {name}={}\n", quote(value)));
    }
    text.push_str(script);
    Ok(text)
}

/// The wrapper run by `sh -c`. It reads the inner script from stdin (the channel's data,
/// ended by EOF), so neither the script nor the variables it exports appear in a command
/// line other users of the machine can list with `ps`; the script travels in the
/// environment, which only the same user can read, and is removed from it before it runs.
///
/// The login shell that started the wrapper has read its startup files already (a bash login
/// shell under sshd reads ~/.bashrc) and the command inherits that environment, so the
/// command's bash reads none (`--norc`): a slow ~/.bashrc is paid once per command, not twice.
const WRAPPER: &str = concat!(
    r#"s=$(cat; echo .); HERMESD_SCRIPT=${s%.}; export HERMESD_SCRIPT; s=; "#,
    r#"run='c=$HERMESD_SCRIPT; unset HERMESD_SCRIPT; eval "$c"'; "#,
    r#"if command -v bash >/dev/null 2>&1; then set -- bash --norc -c "$run"; "#,
    r#"else set -- sh -c "$run"; fi; "#,
    r#"if command -v setsid >/dev/null 2>&1; then setsid "$@" </dev/null 2>&1 & "#,
    r#"else set -m 2>/dev/null; "$@" </dev/null 2>&1 & fi; "#,
    r#"echo "hermesd-pgid:$!" >&2; exec 2>/dev/null; wait "$!""#,
);

/// The exec line of a foreground command; its inner script goes on stdin. Like every line
/// here it is one line: csh-family login shells refuse a newline inside quotes.
pub fn command_line() -> String {
    format!("sh -c {} hermesd", quote(WRAPPER))
}

/// Terminates the group `pgid` (or the process, if it could not get a group of its own):
/// TERM, up to about a second for it to go, then KILL.
pub fn kill_line(pgid: u32) -> String {
    let script = format!(
        "t=-{pgid}; kill -TERM $t 2>/dev/null || {{ t={pgid}; kill -TERM $t 2>/dev/null; }} || exit 0; \
         i=0; while [ $i -lt 10 ] && kill -0 $t 2>/dev/null; \
         do sleep 0.1 2>/dev/null || sleep 1; i=$((i+1)); done; \
         kill -KILL $t 2>/dev/null; exit 0"
    );
    format!("sh -c {}", quote(&script))
}

/// Prints the file's bytes; exits [`MISSING_FILE_EXIT`] when it does not exist. Only a
/// regular file is read (as the local file tools require): a device or a FIFO never ends.
pub fn read_line(cwd: &str, path: &str) -> String {
    let target = remote_path(cwd, path);
    let script = format!(
        "if [ ! -e {target} ] && [ ! -L {target} ]; then exit {MISSING_FILE_EXIT}; fi; \
         if [ -d {target} ]; then echo 'is a directory' >&2; exit 1; fi; \
         if [ ! -f {target} ]; then echo 'is not a regular file' >&2; exit 1; fi; \
         exec cat {target}"
    );
    format!("sh -c {}", quote(&script))
}

/// Replaces the file with stdin, making missing parent directories.
pub fn write_line(cwd: &str, path: &str) -> String {
    let target = remote_path(cwd, path);
    let script = format!("p={target}; d=$(dirname \"$p\") && mkdir -p \"$d\" && cat > \"$p\"");
    format!("sh -c {}", quote(&script))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `line` with the host's sh and returns its stdout (the remote login shell does the
    /// same with an exec request's text).
    fn sh(line: &str) -> String {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(line)
            .env("HOME", "/home/someone")
            .output()
            .expect("sh runs");
        String::from_utf8(out.stdout).expect("utf-8")
    }

    #[test]
    fn exec_lines_are_single_lines() {
        for line in [
            command_line(),
            kill_line(42),
            read_line("~/w", "a b"),
            write_line("/srv", "it's"),
        ] {
            assert!(!line.contains('\n'), "{line}");
        }
    }

    #[test]
    fn quoted_words_reach_the_shell_unchanged() {
        for text in ["plain", "it's", "'", "$(id) `id` $HOME \\ \" *", "a\nb", ""] {
            assert_eq!(sh(&format!("printf %s {}", quote(text))), text);
        }
    }

    #[test]
    fn paths_resolve_against_the_remote_home_and_cwd() {
        let cases = [
            ("~", "a.txt", "/home/someone/a.txt"),
            ("~/w", "a b.txt", "/home/someone/w/a b.txt"),
            ("/srv/x/", "d/it's", "/srv/x/d/it's"),
            ("/srv", "/etc/hosts", "/etc/hosts"),
            ("/srv", "~/n", "/home/someone/n"),
            ("/srv", "~", "/home/someone"),
            ("rel", "f", "./rel/f"),
        ];
        for (cwd, path, want) in cases {
            assert_eq!(sh(&format!("printf %s {}", remote_path(cwd, path))), want);
        }
    }

    #[test]
    fn env_names_a_shell_cannot_export_are_refused() {
        let mut env = BTreeMap::new();
        env.insert("GOOD_1".to_owned(), "x'y $z".to_owned());
        let text = inner_script("/tmp", &env, "printf %s \"$GOOD_1\"").expect("valid");
        assert_eq!(sh(&text), "x'y $z");
        env.insert("BAD-NAME".to_owned(), "v".to_owned());
        let err = inner_script("/tmp", &env, "true").expect_err("refused");
        assert!(err.contains("BAD-NAME"), "{err}");
        assert!(!valid_env_name("1X") && !valid_env_name("") && valid_env_name("_x9"));
    }

    #[test]
    fn the_wrapper_reports_the_group_and_joins_stderr() {
        use std::io::Write;
        let mut child = std::process::Command::new("sh")
            .arg("-c")
            .arg(command_line())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("sh runs");
        let script = "echo out; echo err >&2; test -z \"$HERMESD_SCRIPT\" && printf 'kept\\n\\n'; exit 7\n\n";
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(script.as_bytes())
            .expect("write");
        let out = child.wait_with_output().expect("wait");
        assert_eq!(out.status.code(), Some(7));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "out\nerr\nkept\n\n");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let pid = stderr
            .trim()
            .strip_prefix(PGID_MARKER)
            .expect("marker first");
        assert!(pid.parse::<u32>().is_ok(), "{stderr}");
    }
}
