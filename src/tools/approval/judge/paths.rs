//! Which files a parsed simple command writes or reads, by every means the approval check
//! knows: redirections, `tee`, `dd of=`/`if=`, `cp`/`mv`/`install`/`ln`, in-place editors,
//! mode and owner changes, deletions, and the file operands of readers (`cat`, `grep`, `tar`,
//! `base64`, …). The places themselves are judged by `crate::tools::sensitive::Places`.

use std::path::PathBuf;

use super::{Context, path_candidates};
use crate::tools::approval::parse::{Invocation, RedirectKind, Word, basename, literal};

/// One file the command touches.
#[derive(Debug)]
pub struct Access {
    pub write: bool,
    /// How, for the message (`> `, `tee`, `cp into`, …).
    pub means: String,
    pub candidates: Vec<PathBuf>,
}

/// Commands that never read the contents of their file operands.
const NON_READERS: &[&str] = &[
    "ls", "stat", "test", "[", "echo", "printf", "cd", "pushd", "mkdir", "rmdir", "touch", "which",
    "type", "realpath", "readlink", "basename", "dirname", "du", "df", "file", "chmod", "chown",
    "chgrp", "rm", "unlink", "shred", "ln", "find", "git", "export", "true", "false", "command",
    "kill", "sleep", "tree", "exa", "eza",
];

/// Commands that write every file operand (after their options).
const OPERAND_WRITERS: &[&str] = &[
    "tee", "touch", "truncate", "rm", "unlink", "shred", "mkdir", "rmdir", "chmod", "chown",
    "chgrp", "chattr", "setfacl",
];

fn operands(args: &[Word]) -> Vec<&Word> {
    let mut done = false;
    args.iter()
        .filter(|w| {
            let v = w.shown();
            if done {
                return true;
            }
            if v == "--" {
                done = true;
                return false;
            }
            !(v.starts_with('-') && v.len() > 1)
        })
        .collect()
}

fn strip_prefix_word(word: &Word, prefix: &str) -> Option<Word> {
    let value = word.value.as_deref()?.strip_prefix(prefix)?;
    Some(literal(value))
}

/// The files `inv` writes and reads.
pub fn accesses(inv: &Invocation, ctx: &Context<'_>) -> Vec<Access> {
    let cwd = inv.cwd.as_deref();
    let mut out = Vec::new();
    let mut add = |write: bool, means: &str, word: &Word| {
        let candidates = path_candidates(word, cwd, ctx);
        if !candidates.is_empty() {
            out.push(Access {
                write,
                means: means.to_owned(),
                candidates,
            });
        }
    };
    for r in &inv.redirects {
        match r.kind {
            RedirectKind::Write => add(true, r.operator, &r.target),
            RedirectKind::Read => add(false, r.operator, &r.target),
            RedirectKind::ReadWrite => {
                add(true, r.operator, &r.target);
                add(false, r.operator, &r.target);
            }
            RedirectKind::HereText | RedirectKind::Duplicate => {}
        }
    }
    let words = super::strip_wrappers(&inv.words);
    let Some(name) = words.first().and_then(|w| w.value.as_deref()) else {
        return out;
    };
    let name = basename(name);
    let args = &words[1..];
    let ops = operands(args);
    match name {
        "dd" => {
            for arg in args {
                if let Some(target) = strip_prefix_word(arg, "of=") {
                    add(true, "dd of=", &target);
                }
                if let Some(source) = strip_prefix_word(arg, "if=") {
                    add(false, "dd if=", &source);
                }
            }
            return out;
        }
        "cp" | "mv" | "install" | "ln" | "rsync" | "scp" => {
            let target_dir = args.iter().enumerate().find_map(|(i, w)| {
                let v = w.value.as_deref()?;
                if v == "-t" {
                    args.get(i + 1).cloned()
                } else {
                    v.strip_prefix("--target-directory=").map(literal)
                }
            });
            let (sources, dest): (Vec<&Word>, Option<Word>) = match target_dir {
                Some(dir) => (ops.clone(), Some(dir)),
                None => match ops.split_last() {
                    Some((last, rest)) if !rest.is_empty() || name == "ln" => {
                        (rest.to_vec(), Some((*last).clone()))
                    }
                    _ => (Vec::new(), None),
                },
            };
            let means = format!("{name} into");
            if let Some(dest) = &dest {
                add(true, &means, dest);
                // Into a directory: the file keeps its name there.
                for source in &sources {
                    if let (Some(d), Some(s)) = (&dest.value, &source.value) {
                        let joined = literal(&format!("{d}/{}", basename(s)));
                        add(true, &means, &joined);
                    }
                }
            }
            for source in sources {
                if name == "mv" {
                    add(true, "mv from", source);
                }
                if name != "ln" {
                    add(false, &format!("{name} from"), source);
                }
            }
            return out;
        }
        "sed" | "perl" | "ruby" => {
            let in_place = args.iter().any(|w| {
                let v = w.shown();
                v == "--in-place"
                    || v.starts_with("--in-place=")
                    || (v.starts_with('-') && !v.starts_with("--") && v.contains('i'))
            });
            if in_place {
                for op in ops.iter().skip(usize::from(name == "sed")) {
                    add(true, &format!("{name} -i"), op);
                }
            }
        }
        "chmod" | "chown" | "chgrp" => {
            for op in ops.iter().skip(1) {
                add(true, name, op);
            }
            return out;
        }
        _ if OPERAND_WRITERS.contains(&name) => {
            for op in &ops {
                add(true, name, op);
            }
            return out;
        }
        _ => {}
    }
    if !NON_READERS.contains(&name) {
        for op in &ops {
            add(false, name, op);
        }
    }
    out
}
