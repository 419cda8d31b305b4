//! Interpreters as the approval check sees them: where each takes its program from (an
//! inline `-c`/`-e` option, a file, standard input), which producers (downloads, decoders)
//! may not feed one, and read-only tools whose options run a program.

use super::{
    Context, Finding, KEY_DECODED_TO_INTERPRETER, KEY_INLINE_SCRIPT, KEY_INTERPRETER_HEREDOC,
    KEY_PIPED_PROGRAM, KEY_PROGRAM_OPTION, KEY_REMOTE_PROCESS_SUBSTITUTION,
    KEY_REMOTE_TO_INTERPRETER, KEY_SHELL_HEREDOC, judge_code, judge_text, push, short_flags,
};
use crate::tools::approval::parse::{Invocation, Producer, RedirectKind, Scope, Word};

const SHELLS: &[&str] = &[
    "sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "yash", "fish", "busybox", "rbash",
];
const DOWNLOADERS: &[&str] = &[
    "curl",
    "wget",
    "fetch",
    "aria2c",
    "http",
    "https",
    "httpie",
    "lwp-request",
    "nc",
    "ncat",
    "netcat",
    "socat",
    "telnet",
    "ftp",
    "tftp",
    "scp",
    "sftp",
    "rsync",
    "ssh",
    "gh",
];
/// Interpreters other than shells, and the options that hand them a program inline.
pub(super) fn inline_code_options(name: &str) -> Option<&'static [&'static str]> {
    let family = name.trim_end_matches(".exe");
    let is = |prefix: &str| {
        family == prefix
            || family
                .strip_prefix(prefix)
                .is_some_and(|rest| rest.chars().all(|c| c.is_ascii_digit() || c == '.'))
    };
    if is("python") || is("pypy") || family == "py" {
        Some(&["-c"])
    } else if is("perl") {
        Some(&["-e", "-E"])
    } else if is("ruby") {
        Some(&["-e"])
    } else if family == "node" || family == "nodejs" || family == "bun" || family == "deno" {
        Some(&["-e", "-p", "--eval", "--print", "eval"])
    } else if is("php") {
        Some(&["-r"])
    } else if is("lua") || family == "luajit" {
        Some(&["-e"])
    } else if family == "powershell" || family == "pwsh" {
        Some(&["-c", "-command", "-encodedcommand", "-enc", "-e"])
    } else if family == "tclsh" || family == "wish" || family == "Rscript" || family == "osascript"
    {
        Some(&["-e"])
    } else {
        None
    }
}

pub fn is_shell(name: &str) -> bool {
    SHELLS.contains(&name)
}

pub fn is_interpreter(name: &str) -> bool {
    is_shell(name) || inline_code_options(name).is_some()
}

/// A producer whose output is a program from elsewhere: a download or a decoded blob.
pub(super) fn producer_kind(p: &Producer) -> Option<&'static str> {
    let name = p.name.as_str();
    if DOWNLOADERS.contains(&name) {
        return Some(KEY_REMOTE_TO_INTERPRETER);
    }
    let has = |flags: &[&str]| {
        p.args.iter().any(|a| {
            flags.contains(&a.as_str())
                || (a.starts_with('-')
                    && !a.starts_with("--")
                    && flags
                        .iter()
                        .any(|f| f.len() == 2 && !f.starts_with("--") && a.contains(&f[1..])))
        })
    };
    let decoder = match name {
        "base64" | "base32" | "basenc" | "base16" => has(&["-d", "-D", "--decode"]),
        "xxd" => has(&["-r", "-revert"]),
        "openssl" => has(&["-d", "-base64", "-a"]) || p.args.iter().any(|a| a == "base64"),
        "uudecode" | "gunzip" | "zcat" | "bunzip2" | "unxz" | "xzcat" | "zstdcat" | "rev"
        | "tr" => true,
        "gzip" | "bzip2" | "xz" | "zstd" => has(&["-d", "--decompress"]),
        "printf" => p
            .args
            .first()
            .is_some_and(|f| f.contains("\\x") || f.contains("\\0")),
        _ => false,
    };
    decoder.then_some(KEY_DECODED_TO_INTERPRETER)
}

/// Where an interpreter takes its program from.
enum ProgramSource<'a> {
    Inline(Option<&'a Word>),
    File(&'a Word),
    Stdin,
    Other,
}

fn program_source<'a>(args: &'a [Word], inline: &[&str], shell: bool) -> ProgramSource<'a> {
    let mut i = 0;
    while let Some(word) = args.get(i) {
        let v = word.shown();
        if inline.contains(&v) || (shell && short_flags(v).is_some_and(|f| f.contains('c'))) {
            return ProgramSource::Inline(args.get(i + 1));
        }
        if !shell
            && let Some(opt) = inline
                .iter()
                .find(|o| o.len() == 2 && v.starts_with(**o) && v.len() > 2 && !v.starts_with("--"))
        {
            let _ = opt;
            return ProgramSource::Inline(None);
        }
        if !shell
            && short_flags(v)
                .is_some_and(|f| inline.iter().any(|o| o.len() == 2 && f.contains(&o[1..])))
        {
            return ProgramSource::Inline(None);
        }
        if v == "-" || (shell && v == "-s") {
            return ProgramSource::Stdin;
        }
        if v == "-m" && !shell {
            return ProgramSource::Other;
        }
        if v.starts_with('-') || v.starts_with('+') {
            let takes_value = if shell {
                matches!(v, "-o" | "+o" | "-O" | "+O" | "--rcfile" | "--init-file")
            } else {
                matches!(v, "-W" | "-X" | "-I" | "-r" | "--require" | "-M")
            };
            i += if takes_value { 2 } else { 1 };
            continue;
        }
        return ProgramSource::File(word);
    }
    ProgramSource::Stdin
}

fn judge_fed_program(inv: &Invocation, name: &str, script: Option<&Word>, out: &mut Vec<Finding>) {
    let mut feeders: Vec<&Producer> = inv.stdin_from.iter().collect();
    if let Some(script) = script {
        feeders.extend(script.producers.iter());
    }
    for producer in feeders {
        if let Some(key) = producer_kind(producer) {
            let key = if script.is_some_and(|s| s.producers.contains(producer))
                && key == KEY_REMOTE_TO_INTERPRETER
            {
                KEY_REMOTE_PROCESS_SUBSTITUTION
            } else {
                key
            };
            push(
                out,
                Finding::new(key, format!("{} into {name}", producer.name)),
            );
        }
    }
}

pub(super) fn judge_shell(
    args: &[Word],
    inv: &Invocation,
    ctx: &Context<'_>,
    scope: &Scope,
    out: &mut Vec<Finding>,
) {
    match program_source(args, &[], true) {
        ProgramSource::Inline(Some(payload)) => {
            judge_code(std::slice::from_ref(payload), "sh -c", ctx, scope, out);
        }
        ProgramSource::Inline(None) | ProgramSource::Other => {}
        ProgramSource::File(file) => judge_fed_program(inv, "a shell", Some(file), out),
        ProgramSource::Stdin => {
            judge_fed_program(inv, "a shell", None, out);
            for r in &inv.redirects {
                if r.kind == RedirectKind::HereText {
                    if let Some(body) = &r.target.value {
                        judge_text(body, ctx, scope, out);
                    }
                    if r.operator == "<<" {
                        push(out, Finding::new(KEY_SHELL_HEREDOC, ""));
                    }
                }
            }
            if inv.stdin_is_text {
                push(
                    out,
                    Finding::new(
                        KEY_PIPED_PROGRAM,
                        "a shell reads its commands from a pipe or here-text",
                    ),
                );
            }
        }
    }
}

pub(super) fn judge_interpreter(
    name: &str,
    options: &[&str],
    args: &[Word],
    inv: &Invocation,
    out: &mut Vec<Finding>,
) {
    match program_source(args, options, false) {
        ProgramSource::Inline(_) => push(out, Finding::new(KEY_INLINE_SCRIPT, name.to_owned())),
        ProgramSource::File(file) => judge_fed_program(inv, name, Some(file), out),
        ProgramSource::Other => {}
        ProgramSource::Stdin => {
            judge_fed_program(inv, name, None, out);
            if inv.redirects.iter().any(|r| r.operator == "<<") {
                push(out, Finding::new(KEY_INTERPRETER_HEREDOC, name.to_owned()));
            }
            if inv.stdin_is_text || inv.redirects.iter().any(|r| r.kind == RedirectKind::Read) {
                push(
                    out,
                    Finding::new(
                        KEY_PIPED_PROGRAM,
                        format!("{name} reads its program from standard input"),
                    ),
                );
            }
        }
    }
}

/// Read-only tools with an option that runs a program of the caller's choosing.
pub(super) fn judge_program_options(name: &str, values: &[Option<&str>], out: &mut Vec<Finding>) {
    let options: &[&str] = match name {
        "rg" => &["--pre", "--hostname-bin"],
        "sort" => &["--compress-program"],
        "ag" => &["--pager"],
        "man" => &["--pager", "--html", "-P", "-H"],
        "git" => &["-c"],
        _ => return,
    };
    for (i, v) in values.iter().enumerate() {
        let Some(v) = v else { continue };
        if name == "git" {
            let next = values
                .get(i + 1)
                .copied()
                .flatten()
                .unwrap_or_default()
                .to_ascii_lowercase();
            if *v == "-c"
                && (next.starts_with("core.pager")
                    || next.starts_with("core.sshcommand")
                    || next.starts_with("core.fsmonitor")
                    || next.contains(".textconv")
                    || next.starts_with("alias."))
            {
                let key = format!("{KEY_PROGRAM_OPTION} git -c");
                push(out, Finding::new(&key, next));
            }
            continue;
        }
        if let Some(option) = options.iter().find(|o| {
            v == *o || v.starts_with(&format!("{o}=")) || (o.len() == 2 && v.starts_with(**o))
        }) {
            // Hermes names the tool and the option in the key.
            let key = format!("{KEY_PROGRAM_OPTION} {name} {option}");
            push(out, Finding::new(&key, ""));
        }
    }
}
