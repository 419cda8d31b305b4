//! The judgments made on each parsed simple command (see `parse.rs`): which ones need the
//! user's approval, and why. Each rule names the Hermes approval key it shares where Hermes
//! has the same category (so a `command_allowlist` written by either side still matches), or
//! a key of its own where Hermes has none.
//!
//! Its two parts, `interpreters.rs` (where a program comes from) and `paths.rs` (which files
//! a command touches), live inside it: the judge and the interpreter rules call each other
//! (an inline `-c` program is judged again as a script).

mod interpreters;
mod paths;

use std::path::{Path, PathBuf};

use self::interpreters::{
    inline_code_options, is_interpreter, is_shell, judge_interpreter, judge_program_options,
    judge_shell, producer_kind,
};
use self::paths::{Access, accesses};
use crate::tools::approval::parse::{Invocation, Scope, Script, Word, basename, read_script};
use crate::tools::sensitive::{Guarded, Places};

pub const KEY_RECURSIVE_DELETE: &str = "recursive delete";
pub const KEY_DELETE_ROOT_PATH: &str = "delete in root path";
pub const KEY_WORLD_WRITABLE: &str = "world/other-writable permissions";
pub const KEY_FIND_DELETE: &str = "find -delete";
pub const KEY_FIND_EXEC: &str = "find -exec/-execdir rm";
pub const KEY_XARGS: &str = "xargs with rm";
pub const KEY_REMOTE_TO_INTERPRETER: &str = "pipe remote content to shell";
pub const KEY_DECODED_TO_INTERPRETER: &str =
    "pipe decoded content to shell (possible command obfuscation)";
pub const KEY_REMOTE_PROCESS_SUBSTITUTION: &str = "execute remote script via process substitution";
pub const KEY_REMOTE_COMMAND_SUBSTITUTION: &str = "execute remote content via command substitution";
pub const KEY_INLINE_SCRIPT: &str = "script execution via -e/-c flag";
pub const KEY_SHELL_HEREDOC: &str = "shell execution via heredoc";
pub const KEY_DYNAMIC_COMMAND: &str = "command name built at run time";
pub const KEY_DYNAMIC_CODE: &str = "eval or sh -c of text built at run time";
pub const KEY_PIPED_PROGRAM: &str = "program piped into an interpreter";
pub const KEY_PROTECTED_WRITE: &str = "write to a protected place";
pub const KEY_SECRET_READ: &str = "read a secret file";
pub const KEY_UNREADABLE: &str = "command the shell parser cannot read";
pub const KEY_PROGRAM_OPTION: &str = "arbitrary program execution via";
pub const KEY_INTERPRETER_HEREDOC: &str = "script execution via heredoc";

/// One reason a command needs approval. `key` is what approvals are stored under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub key: String,
    pub description: String,
}

impl Finding {
    pub(super) fn new(key: &str, detail: impl Into<String>) -> Self {
        let detail = detail.into();
        Finding {
            key: key.to_owned(),
            description: if detail.is_empty() {
                key.to_owned()
            } else {
                format!("{key}: {detail}")
            },
        }
    }
}

/// What a judgment needs to know about the machine.
#[derive(Debug)]
pub struct Context<'a> {
    pub places: &'a Places,
    pub home: Option<&'a str>,
    pub hermes_home: Option<&'a str>,
    /// Shell text found inside commands (`eval`, `sh -c`, here-documents), for the caller's
    /// pattern table.
    pub nested: std::cell::RefCell<Vec<String>>,
}

/// Commands that run the rest of their arguments as a command.
const WRAPPERS: &[&str] = &[
    "sudo", "doas", "env", "exec", "nohup", "setsid", "time", "command", "builtin", "nice",
    "ionice", "timeout", "stdbuf", "chrt", "taskset", "unbuffer", "xvfb-run", "flock",
];
/// Commands `find -exec` or `xargs` may not run without approval.
const DESTRUCTIVE: &[&str] = &[
    "rm", "unlink", "shred", "rmdir", "truncate", "dd", "mv", "chmod", "chown", "wipe", "srm",
];

/// Judges every simple command of `script` (and of the scripts it hands to `eval`,
/// `sh -c`, `find -exec` and `xargs`).
pub fn judge_script(script: &Script, ctx: &Context<'_>, scope: &Scope, out: &mut Vec<Finding>) {
    for inv in &script.invocations {
        judge_invocation(inv, ctx, scope, out);
    }
}

pub(super) fn push(out: &mut Vec<Finding>, finding: Finding) {
    if !out.iter().any(|f| f.key == finding.key) {
        out.push(finding);
    }
}

/// The words of the command that really runs, wrappers (`sudo`, `env X=1`, `nice -n 5`,
/// `timeout 10`) taken off. `None` when a wrapper's own syntax hides the command.
pub fn strip_wrappers(words: &[Word]) -> &[Word] {
    let mut rest = words;
    while let Some(name) = rest.first().and_then(|w| w.value.as_deref()) {
        let name = basename(name);
        if !WRAPPERS.contains(&name) {
            break;
        }
        let mut i = 1;
        while let Some(word) = rest.get(i) {
            let Some(v) = word.value.as_deref() else {
                break;
            };
            let takes_value = match name {
                "sudo" | "doas" => {
                    matches!(v, "-u" | "-g" | "-C" | "-h" | "-p" | "-U" | "-r" | "-t")
                }
                "env" => matches!(v, "-u" | "-C" | "-S" | "--unset" | "--chdir"),
                "nice" => matches!(v, "-n" | "--adjustment"),
                "ionice" => matches!(v, "-c" | "-n" | "-p"),
                "timeout" => matches!(v, "-s" | "--signal" | "-k" | "--kill-after"),
                _ => false,
            };
            // Operands of the wrapper itself: `env X=1`, `timeout 10`, `chrt 5`,
            // `taskset MASK`, `flock FILE`.
            let own_operand = (name == "env" && v.contains('='))
                || (matches!(name, "timeout" | "chrt")
                    && v.chars().next().is_some_and(|c| c.is_ascii_digit()))
                || (matches!(name, "taskset" | "flock") && i == 1);
            if v.starts_with('-') && v != "-" {
                i += if takes_value { 2 } else { 1 };
            } else if own_operand {
                i += 1;
            } else {
                break;
            }
        }
        rest = &rest[i.min(rest.len())..];
    }
    rest
}

fn judge_invocation(inv: &Invocation, ctx: &Context<'_>, scope: &Scope, out: &mut Vec<Finding>) {
    for access in accesses(inv, ctx) {
        judge_access(&access, ctx, out);
    }
    // Text this command runs (`eval`, `sh -c`, `find -exec`) starts where it runs.
    let here = Scope {
        cwd: inv.cwd.clone(),
        ..scope.clone()
    };
    let scope = &here;
    let words = strip_wrappers(&inv.words);
    let Some(first) = words.first() else {
        // Only wrappers and their options: `sudo -l` runs nothing else, `sudo $X` might.
        if inv.words.iter().any(|w| w.value.is_none()) {
            push(
                out,
                Finding::new(
                    KEY_DYNAMIC_COMMAND,
                    "a wrapper runs a command named at run time",
                ),
            );
        }
        return;
    };
    let Some(name) = first
        .value
        .as_deref()
        .filter(|_| !first.pattern && !first.expanded)
    else {
        push(
            out,
            Finding::new(
                KEY_DYNAMIC_COMMAND,
                format!("'{}' is only known when it runs", first.raw),
            ),
        );
        return;
    };
    let name = basename(name);
    let args = &words[1..];
    let values: Vec<Option<&str>> = args.iter().map(|w| w.value.as_deref()).collect();
    match name {
        "rm" => judge_rm(args, inv, out),
        "chmod" => judge_chmod(args, out),
        "find" => judge_find(args, ctx, scope, out),
        "xargs" => judge_xargs(args, ctx, scope, out),
        "eval" => judge_code(args, "eval", ctx, scope, out),
        "source" | "." => judge_source(args, out),
        _ => {}
    }
    if is_shell(name) {
        judge_shell(args, inv, ctx, scope, out);
    } else if let Some(options) = inline_code_options(name) {
        judge_interpreter(name, options, args, inv, out);
    }
    judge_program_options(name, &values, out);
}

fn judge_access(access: &Access, ctx: &Context<'_>, out: &mut Vec<Finding>) {
    let guarded = |path: &Path| -> Option<Guarded> {
        if access.write {
            ctx.places.guard_write(path)
        } else {
            ctx.places.guard_read(path)
        }
    };
    for path in &access.candidates {
        if let Some(g) = guarded(path) {
            let key = if access.write {
                KEY_PROTECTED_WRITE
            } else {
                KEY_SECRET_READ
            };
            push(
                out,
                Finding::new(
                    key,
                    format!(
                        "{} {} ({} is {})",
                        access.means,
                        path.display(),
                        g.key,
                        g.what
                    ),
                ),
            );
            return;
        }
    }
}

pub(super) fn short_flags(value: &str) -> Option<&str> {
    value
        .strip_prefix('-')
        .filter(|f| !f.starts_with('-') && !f.is_empty())
}

fn judge_rm(args: &[Word], inv: &Invocation, out: &mut Vec<Finding>) {
    let mut options_done = false;
    for arg in args {
        let value = arg.shown();
        if !options_done && value == "--" {
            options_done = true;
            continue;
        }
        if !options_done
            && (value == "--recursive"
                || short_flags(value).is_some_and(|f| f.contains(['r', 'R'])))
        {
            push(out, Finding::new(KEY_RECURSIVE_DELETE, ""));
            continue;
        }
        if !options_done && value.starts_with('-') {
            continue;
        }
        if value.starts_with('/') || (arg.value.is_none() && arg.known_tail.starts_with('/')) {
            let _ = inv;
            push(out, Finding::new(KEY_DELETE_ROOT_PATH, value.to_owned()));
        }
    }
}

/// `777`, `0777`, `00666`, `o+w`, `a+rwx`, `go=w`: anyone may write.
pub fn world_writable_mode(mode: &str) -> bool {
    if !mode.is_empty() && mode.chars().all(|c| c.is_ascii_digit()) {
        let digits = mode.trim_start_matches('0');
        return digits.chars().all(|c| ('0'..='7').contains(&c))
            && digits
                .chars()
                .last()
                .and_then(|c| c.to_digit(8))
                .is_some_and(|other| other & 2 != 0 && digits.len() >= 3);
    }
    mode.split(',').any(|clause| {
        let who: String = clause.chars().take_while(|c| "ugoa".contains(*c)).collect();
        let rest = &clause[who.len()..];
        (who.contains('o') || who.contains('a'))
            && rest.starts_with(['+', '='])
            && rest[1..].contains('w')
    })
}

fn judge_chmod(args: &[Word], out: &mut Vec<Finding>) {
    let mode = args
        .iter()
        .filter_map(|a| a.value.as_deref())
        .find(|v| !v.starts_with('-'));
    if let Some(mode) = mode
        && world_writable_mode(mode)
    {
        push(out, Finding::new(KEY_WORLD_WRITABLE, mode.to_owned()));
    }
}

/// Judges `argv` as a command of its own (for `find -exec`, `xargs`): its findings, or a
/// finding when the command itself deletes or changes files.
fn judge_argv(argv: &[Word], ctx: &Context<'_>, scope: &Scope) -> (bool, Vec<Finding>) {
    let inv = Invocation {
        words: argv.to_vec(),
        redirects: Vec::new(),
        stdin_from: Vec::new(),
        stdin_is_text: false,
        cwd: scope.cwd.clone(),
        depth: 0,
    };
    let mut findings = Vec::new();
    judge_invocation(&inv, ctx, scope, &mut findings);
    let core = strip_wrappers(argv);
    let destructive = core
        .first()
        .and_then(|w| w.value.as_deref())
        .is_none_or(|n| DESTRUCTIVE.contains(&basename(n)) || is_interpreter(basename(n)));
    (destructive, findings)
}

fn judge_find(args: &[Word], ctx: &Context<'_>, scope: &Scope, out: &mut Vec<Finding>) {
    let mut i = 0;
    while i < args.len() {
        let value = args[i].shown();
        if value == "-delete" {
            push(out, Finding::new(KEY_FIND_DELETE, ""));
        }
        if matches!(value, "-exec" | "-execdir" | "-ok" | "-okdir") {
            let end = args[i + 1..]
                .iter()
                .position(|w| matches!(w.shown(), ";" | "+"))
                .map_or(args.len(), |p| i + 1 + p);
            let (destructive, inner) = judge_argv(&args[i + 1..end], ctx, scope);
            if destructive || !inner.is_empty() {
                let shown: Vec<&str> = args[i + 1..end].iter().map(Word::shown).collect();
                push(
                    out,
                    Finding::new(KEY_FIND_EXEC, format!("{value} {}", shown.join(" "))),
                );
            }
            for f in inner {
                push(out, f);
            }
            i = end;
        }
        i += 1;
    }
}

fn judge_xargs(args: &[Word], ctx: &Context<'_>, scope: &Scope, out: &mut Vec<Finding>) {
    let mut i = 0;
    while let Some(v) = args.get(i).map(Word::shown) {
        if !v.starts_with('-') {
            break;
        }
        let takes_value = matches!(
            v,
            "-a" | "-d" | "-E" | "-I" | "-L" | "-n" | "-P" | "-s" | "--arg-file" | "--delimiter"
        );
        i += if takes_value { 2 } else { 1 };
    }
    let argv = &args[i.min(args.len())..];
    if argv.is_empty() {
        return;
    }
    let (destructive, inner) = judge_argv(argv, ctx, scope);
    if destructive || !inner.is_empty() {
        push(out, Finding::new(KEY_XARGS, argv[0].shown().to_owned()));
    }
    for f in inner {
        push(out, f);
    }
}

/// `eval WORDS` and `sh -c WORD`: literal text is parsed and judged like a command line
/// of its own; text known only at run time needs approval.
pub(super) fn judge_code(
    args: &[Word],
    what: &str,
    ctx: &Context<'_>,
    scope: &Scope,
    out: &mut Vec<Finding>,
) {
    if args.is_empty() {
        return;
    }
    if args.iter().any(|w| w.value.is_none()) {
        for word in args {
            for producer in &word.producers {
                if producer_kind(producer) == Some(KEY_REMOTE_TO_INTERPRETER) {
                    push(
                        out,
                        Finding::new(KEY_REMOTE_COMMAND_SUBSTITUTION, producer.name.clone()),
                    );
                }
            }
        }
        push(
            out,
            Finding::new(
                KEY_DYNAMIC_CODE,
                format!("{what} of text known only when it runs"),
            ),
        );
        return;
    }
    let text: Vec<&str> = args.iter().map(Word::shown).collect();
    judge_text(&text.join(" "), ctx, scope, out);
}

/// Parses and judges a piece of shell text found inside another command.
pub fn judge_text(text: &str, ctx: &Context<'_>, scope: &Scope, out: &mut Vec<Finding>) {
    ctx.nested.borrow_mut().push(text.to_owned());
    let mut inner_scope = scope.clone();
    match read_script(text, &mut inner_scope) {
        Ok(script) => judge_script(&script, ctx, &inner_scope, out),
        Err(e) => push(out, Finding::new(KEY_UNREADABLE, e.to_string())),
    }
}

fn judge_source(args: &[Word], out: &mut Vec<Finding>) {
    let Some(file) = args.first() else { return };
    for producer in &file.producers {
        if producer_kind(producer).is_some() {
            push(
                out,
                Finding::new(KEY_REMOTE_PROCESS_SUBSTITUTION, producer.name.clone()),
            );
        }
    }
    if file.value.is_none() && file.producers.is_empty() && file.known_tail.is_empty() {
        push(
            out,
            Finding::new(KEY_DYNAMIC_CODE, "source of a file named at run time"),
        );
    }
}

/// Where a path word may point: absolute, relative to the known directory, or — when the
/// directory or a leading part is unknown — under either home, so the guard errs on the side
/// of asking.
pub fn path_candidates(word: &Word, cwd: Option<&Path>, ctx: &Context<'_>) -> Vec<PathBuf> {
    let homes = || {
        ctx.home
            .into_iter()
            .chain(ctx.hermes_home)
            .map(PathBuf::from)
            .collect::<Vec<_>>()
    };
    match word.value.as_deref() {
        Some("") => Vec::new(),
        Some(v) => {
            let v = expand_tilde(v, ctx.home);
            if v.starts_with('/') {
                vec![PathBuf::from(v)]
            } else if let Some(cwd) = cwd {
                vec![cwd.join(v)]
            } else {
                homes().into_iter().map(|h| h.join(&v)).collect()
            }
        }
        None => {
            let tail = word.known_tail.trim_start_matches('/');
            if tail.is_empty()
                || !word.known_tail.starts_with('/')
                    && word.known_tail.len() == tail.len()
                    && !word.raw.contains('/')
            {
                return Vec::new();
            }
            homes().into_iter().map(|h| h.join(tail)).collect()
        }
    }
}

fn expand_tilde(value: &str, home: Option<&str>) -> String {
    match (value.strip_prefix('~'), home) {
        (Some(rest), Some(home)) if rest.is_empty() || rest.starts_with('/') => {
            format!("{home}{rest}")
        }
        _ => value.to_owned(),
    }
}
