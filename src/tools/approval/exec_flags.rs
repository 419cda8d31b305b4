//! Program-bearing options parsed in their command's context (Python
//! `_execution_flag_findings`): `python -c`, `node -e`, interpreter heredocs, `bash -c` (whose
//! payload is checked like a command of its own), and read-only tools that run programs
//! (`rg --pre`, `sort --compress-program`, `man -P`, `ag --pager`).

use std::sync::LazyLock;

use regex::Regex;

use super::shell::{basename, chars, command_word_spans, string, top_level_segments};
use super::words::{deobfuscate_word, shlex_tokens};

pub const MALFORMED_EXEC_DESCRIPTION: &str = "command parser limit or malformed executable payload";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Python,
    Node,
    Perl,
    Ruby,
    Php,
    Powershell,
}

static FAMILIES: LazyLock<Vec<(Regex, Family)>> = LazyLock::new(|| {
    [
        (
            r"py(?:\.exe)?|python[23]?(?:\.\d+)*(?:\.exe)?",
            Family::Python,
        ),
        (r"node(?:js)?(?:\.exe)?", Family::Node),
        (r"perl[0-9]*(?:\.\d+)*(?:\.exe)?", Family::Perl),
        (r"ruby[0-9.]*(?:\.exe)?", Family::Ruby),
        (r"php(?:\.exe)?", Family::Php),
        (r"powershell(?:\.exe)?|pwsh(?:\.exe)?", Family::Powershell),
    ]
    .into_iter()
    .map(|(re, family)| (Regex::new(&format!("^(?:{re})$")).expect("regex"), family))
    .collect()
});

fn interpreter_family(executable: &str) -> Option<Family> {
    let name = basename(executable).to_lowercase();
    FAMILIES
        .iter()
        .find(|(re, _)| re.is_match(&name))
        .map(|(_, family)| *family)
}

fn exec_flags(family: Family) -> &'static [&'static str] {
    match family {
        Family::Python => &["-c"],
        Family::Node => &["-e", "--eval", "-p", "--print"],
        Family::Perl => &["-e", "--eval"],
        Family::Ruby => &["-e"],
        Family::Php => &["-r"],
        Family::Powershell => &["-command", "-c", "-file", "-f"],
    }
}

fn options_with_arg(family: Family) -> &'static [&'static str] {
    match family {
        Family::Python => &["-W", "-X", "--check-hash-based-pycs"],
        Family::Node => &[
            "-C",
            "--conditions",
            "--cpu-prof-dir",
            "--diagnostic-dir",
            "--icu-data-dir",
            "--import",
            "--loader",
            "--openssl-config",
            "--require",
            "--title",
        ],
        Family::Perl => &["-0", "-F", "-I", "-M", "-m", "-x"],
        Family::Ruby => &["-C", "-E", "-F", "-I", "-K", "-r"],
        Family::Php => &["-c", "-d", "-z"],
        Family::Powershell => &[
            "-configurationname",
            "-custompipename",
            "-executionpolicy",
            "-inputformat",
            "-outputformat",
            "-settingsfile",
            "-version",
            "-windowstyle",
            "-workingdirectory",
        ],
    }
}

fn split_option(token: &str) -> (&str, Option<&str>) {
    match token.split_once('=') {
        Some((option, value)) => (option, Some(value)),
        None => (token, None),
    }
}

/// The execution-bearing interpreter option in `args`, if any.
fn interpreter_exec_flag(family: Family, args: &[String]) -> Option<String> {
    let flags = exec_flags(family);
    let with_arg = options_with_arg(family);
    let powershell = family == Family::Powershell;
    let mut skip_value = false;
    for token in args {
        if skip_value {
            skip_value = false;
            continue;
        }
        if token == "--" {
            break;
        }
        if !powershell && !token.starts_with('-') {
            break;
        }
        let (option, attached) = split_option(token);
        let comparable = if powershell {
            option.to_lowercase()
        } else {
            option.to_owned()
        };
        if flags.contains(&comparable.as_str()) {
            return Some(comparable);
        }
        // `-Wonce` and `ruby -rjson` attach a value; they are not option bundles.
        let attached_value = with_arg.iter().any(|short| {
            short.starts_with('-')
                && !short.starts_with("--")
                && option.starts_with(short)
                && option.len() > short.len()
        });
        if !powershell && !option.starts_with("--") && option.chars().count() > 2 && !attached_value
        {
            for ch in option.chars().skip(1) {
                let short = format!("-{ch}");
                if flags.contains(&short.as_str()) {
                    return Some(short);
                }
            }
        }
        if with_arg.contains(&comparable.as_str()) && attached.is_none() {
            skip_value = true;
        }
    }
    None
}

const BASH_OPTIONS_WITH_ARG: [&str; 6] = ["-O", "+O", "-o", "+o", "--init-file", "--rcfile"];
const BASH_SHORT_OPTION_LETTERS: &str = "ilrsDcabefhkmnptuvxBCEHPTOo";

/// Whether Bash's `-c` occurs in `args`, and the command string it owns.
fn bash_exec_payload(args: &[String]) -> (bool, Option<String>) {
    let mut index = 0;
    while index < args.len() {
        let token = &args[index];
        if token == "--" || !(token.starts_with('-') || token.starts_with('+')) {
            break;
        }
        if BASH_OPTIONS_WITH_ARG.contains(&token.as_str()) {
            index += 2;
            continue;
        }
        if token.starts_with("--") {
            index += 1;
            continue;
        }
        let letters: String = token.chars().skip(1).collect();
        if !letters
            .chars()
            .all(|ch| BASH_SHORT_OPTION_LETTERS.contains(ch))
        {
            index += 1;
            continue;
        }
        let consumed_option_arg = usize::from(letters.contains('O') || letters.contains('o'));
        if !letters.contains('c') {
            index += 1 + consumed_option_arg;
            continue;
        }
        let payload = args.get(index + 1 + consumed_option_arg).cloned();
        return (true, payload);
    }
    (false, None)
}

const READ_TOOLS: [&str; 4] = ["sort", "rg", "ag", "man"];

fn read_tool_exec_flags(tool: &str) -> &'static [&'static str] {
    match tool {
        "sort" => &["--compress-program"],
        "rg" => &["--pre", "--hostname-bin"],
        "ag" => &["--pager"],
        "man" => &["--pager", "--html", "-P", "-H"],
        _ => &[],
    }
}

fn read_tool_long_options_with_arg(tool: &str) -> &'static [&'static str] {
    match tool {
        "rg" => &[
            "--after-context",
            "--before-context",
            "--color",
            "--colors",
            "--context",
            "--context-separator",
            "--dfa-size-limit",
            "--encoding",
            "--engine",
            "--field-context-separator",
            "--field-match-separator",
            "--file",
            "--generate",
            "--glob",
            "--hostname-bin",
            "--hyperlink-format",
            "--iglob",
            "--ignore-file",
            "--max-columns",
            "--max-count",
            "--max-depth",
            "--max-filesize",
            "--path-separator",
            "--pre",
            "--pre-glob",
            "--regex-size-limit",
            "--regexp",
            "--replace",
            "--sort",
            "--sortr",
            "--threads",
            "--type",
            "--type-add",
            "--type-clear",
            "--type-not",
        ],
        "sort" => &[
            "--batch-size",
            "--buffer-size",
            "--compress-program",
            "--field-separator",
            "--files0-from",
            "--key",
            "--output",
            "--parallel",
            "--random-source",
            "--sort",
            "--temporary-directory",
        ],
        "man" => &[
            "--config-file",
            "--encoding",
            "--extension",
            "--locale",
            "--manpath",
            "--pager",
            "--preprocessor",
            "--prompt",
            "--recode",
            "--sections",
            "--systems",
        ],
        "ag" => &[
            "--ackmate-dir-filter",
            "--color-line-number",
            "--color-match",
            "--color-path",
            "--depth",
            "--filename-pattern",
            "--file-search-regex",
            "--ignore",
            "--ignore-dir",
            "--max-count",
            "--pager",
            "--path-to-ignore",
            "--width",
            "--workers",
        ],
        _ => &[],
    }
}

fn read_tool_short_options_with_arg(tool: &str) -> &'static str {
    match tool {
        "rg" => "efEmjgdtTABCMr",
        "sort" => "koStT",
        "man" => "CRLmMSserEPp",
        "ag" => "gGmpW",
        _ => "",
    }
}

/// The option that makes a read-only tool run another program, and that program.
fn read_tool_exec_flag(tool: &str, args: &[String]) -> Option<(String, String)> {
    let flags = read_tool_exec_flags(tool);
    let mut index = 0;
    while index < args.len() {
        let token = &args[index];
        if token == "--" {
            break;
        }
        let (option, attached) = split_option(token);
        let mut matched = flags.contains(&option).then(|| option.to_owned());
        let mut payload = attached.map(str::to_owned);
        if tool == "man"
            && (token.starts_with("-P") || token.starts_with("-H"))
            && token.chars().count() > 2
        {
            matched = Some(token.chars().take(2).collect());
            payload = Some(token.chars().skip(2).collect());
        }
        if let Some(matched) = matched {
            if payload.is_none() {
                payload = args.get(index + 1).cloned();
            }
            if let Some(program) = payload.as_ref().filter(|p| !p.is_empty()) {
                return Some((matched, program.clone()));
            }
            index += if payload.is_some() && !token.contains('=') {
                2
            } else {
                1
            };
            continue;
        }
        if read_tool_long_options_with_arg(tool).contains(&option) && attached.is_none() {
            index += 2;
            continue;
        }
        if token.starts_with('-') && !token.starts_with("--") && token.chars().count() > 1 {
            let short_with_arg = read_tool_short_options_with_arg(tool);
            let letters: Vec<char> = token.chars().skip(1).collect();
            match letters.iter().position(|ch| short_with_arg.contains(*ch)) {
                Some(pos) => index += if pos + 1 == letters.len() { 2 } else { 1 },
                None => index += 1,
            }
            continue;
        }
        index += 1;
    }
    None
}

/// Every execution mechanism found in `command`, with the payload it would run if known.
pub fn execution_flag_findings(command: &str) -> Vec<(String, Option<String>)> {
    let mut findings = Vec::new();
    let c = chars(command);
    for (seg_start, seg_end) in top_level_segments(&c) {
        let segment = &c[seg_start..seg_end];
        for (start, end) in command_word_spans(segment) {
            let executable = deobfuscate_word(&string(&segment[start..end]));
            let tokens = shlex_tokens(&string(&segment[start..]), true);
            let executable_name = basename(&executable).to_lowercase();
            let family = interpreter_family(&executable);
            let program_bearing =
                family.is_some() || READ_TOOLS.contains(&executable_name.as_str());
            let Some(tokens) = tokens else {
                if program_bearing {
                    findings.push((MALFORMED_EXEC_DESCRIPTION.to_owned(), None));
                }
                continue;
            };
            let Some((_, args)) = tokens.split_first() else {
                continue;
            };
            if let Some(family) = family {
                if interpreter_exec_flag(family, args).is_some() {
                    findings.push(("script execution via -e/-c flag".to_owned(), None));
                    continue;
                }
                if args.iter().any(|t| t.starts_with("<<")) {
                    findings.push(("script execution via heredoc".to_owned(), None));
                    continue;
                }
            }
            if matches!(executable_name.as_str(), "bash" | "sh" | "zsh" | "ksh") {
                let (found, payload) = bash_exec_payload(args);
                if found {
                    findings.push(("shell command via -c/-lc flag".to_owned(), payload));
                }
            }
            if READ_TOOLS.contains(&executable_name.as_str())
                && let Some((option, program)) = read_tool_exec_flag(&executable_name, args)
            {
                findings.push((
                    format!("arbitrary program execution via {executable_name} {option}"),
                    Some(program),
                ));
            }
        }
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn first(command: &str) -> Option<(String, Option<String>)> {
        execution_flag_findings(command).into_iter().next()
    }

    #[test]
    fn finds_program_bearing_options() {
        let script = Some(("script execution via -e/-c flag".to_owned(), None));
        assert_eq!(first("python3 -c 'print(1)'"), script);
        assert_eq!(first("node --eval 'x'"), script);
        assert_eq!(first("perl -ne 'print'"), script);
        assert_eq!(first("python3 -Wignore -c x"), script);
        assert_eq!(first("python3 script.py -c x"), None);
        assert_eq!(first("ruby -rjson x.rb"), None);
        assert_eq!(
            first("python3 <<EOF\nprint(1)\nEOF"),
            Some(("script execution via heredoc".to_owned(), None))
        );
        assert_eq!(
            first("bash -lc 'rm -rf /tmp/x'"),
            Some((
                "shell command via -c/-lc flag".to_owned(),
                Some("rm -rf /tmp/x".to_owned())
            ))
        );
        assert_eq!(first("bash --norc script.sh"), None);
        assert_eq!(
            first("rg --pre ./decode.sh foo"),
            Some((
                "arbitrary program execution via rg --pre".to_owned(),
                Some("./decode.sh".to_owned())
            ))
        );
        assert_eq!(
            first("man -Pcat ls"),
            Some((
                "arbitrary program execution via man -P".to_owned(),
                Some("cat".to_owned())
            ))
        );
        assert_eq!(first("rg -e --pre foo"), None);
        assert_eq!(
            first("python3 -c 'unclosed"),
            Some((MALFORMED_EXEC_DESCRIPTION.to_owned(), None))
        );
    }
}
