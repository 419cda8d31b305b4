//! The Python `tools/approval.py` pattern tables, kept in the Python regex spelling so the
//! legacy allowlist keys derived from them stay identical: `DANGEROUS_PATTERNS` (ask the
//! user) and `HARDLINE_PATTERNS` (never run). Compiled once with `fancy-regex`, which has
//! the lookarounds two patterns need; matched case-insensitively with `.` matching newlines.

use std::sync::LazyLock;

use fancy_regex::Regex;

const SSH_SENSITIVE_PATH: &str = r"(?:~|\$home|\$\{home\})/\.ssh(?:/|$)";
const HERMES_ENV_PATH: &str = concat!(
    r"(?:~\/\.hermes/|",
    r"(?:\$home|\$\{home\})/\.hermes/|",
    r"(?:\$hermes_home|\$\{hermes_home\})/)",
    r"\.env\b"
);
const HERMES_CONFIG_PATH: &str = concat!(
    r"(?:~\/\.hermes/|",
    r"(?:\$home|\$\{home\})/\.hermes/|",
    r"(?:\$hermes_home|\$\{hermes_home\})/)",
    r"config\.yaml\b"
);
const PROJECT_ENV_PATH: &str = r#"(?:(?:/|\.{1,2}/)?(?:[^\s/"\'`]+/)*\.env(?:\.[^/\s"\'`]+)*)"#;
const PROJECT_CONFIG_PATH: &str = r#"(?:(?:/|\.{1,2}/)?(?:[^\s/"\'`]+/)*config\.yaml)"#;
const SHELL_RC_FILES: &str =
    r"(?:~|\$home|\$\{home\})/\.(?:bashrc|zshrc|profile|bash_profile|zprofile)\b";
const CREDENTIAL_FILES: &str = r"(?:~|\$home|\$\{home\})/\.(?:netrc|pgpass|npmrc|pypirc)\b";
const MACOS_PRIVATE_SYSTEM_PATH: &str = r"/private/(?:etc|var|tmp|home)/";
const COMMAND_TAIL: &str = r"(?:\s*(?:&&|\|\||;).*)?$";
const WRITE_TARGET_BOUNDARY: &str = r#"(?=[\s;&|<>"\']|$)"#;

/// Start of a command: string start, a newline/backtick, or `$(`, then optional
/// sudo/env/exec/nohup/setsid/time wrappers. `;`, `&` and `|` become newlines first.
const CMDPOS: &str = concat!(
    r"(?:^|[\n`]|\$\()",
    r"\s*",
    r"(?:sudo\s+(?:-[^\s]+\s+)*)?",
    r"(?:env\s+(?:\w+=\S*\s+)*)?",
    r"(?:(?:exec|nohup|setsid|time)\s+)*",
    r"\s*"
);
const HARDLINE_SYSTEM_DIRS: &str = concat!(
    r"/home|/home/\*|/root|/root/\*|/etc|/etc/\*|/usr|/usr/\*|",
    r"/var|/var/\*|/bin|/bin/\*|/sbin|/sbin/\*|/boot|/boot/\*|/lib|/lib/\*"
);

fn system_config_path() -> String {
    format!(r"(?:/etc/|{MACOS_PRIVATE_SYSTEM_PATH})")
}

fn sensitive_write_target() -> String {
    format!(
        r"(?:{}|/dev/sd|{SSH_SENSITIVE_PATH}|{HERMES_ENV_PATH}|{HERMES_CONFIG_PATH}|{SHELL_RC_FILES}|{CREDENTIAL_FILES})",
        system_config_path()
    )
}

fn user_sensitive_write_target() -> String {
    format!(r"(?:{SSH_SENSITIVE_PATH}|{SHELL_RC_FILES}|{CREDENTIAL_FILES})")
}

fn project_sensitive_write_target() -> String {
    format!(r"(?:{PROJECT_ENV_PATH}|{PROJECT_CONFIG_PATH})")
}

/// A destructive rm path: quoted on its own, or bare and followed by a terminator.
fn hardline_rm_path(path_alt: &str) -> String {
    let tail = r"(?:\s|$|[)`;|&])";
    format!(r#"(?:["\'](?:{path_alt})["\']|(?:{path_alt}){tail})"#)
}

fn rm_flag_prefix() -> String {
    format!(r"{CMDPOS}rm\s+(-[^\s]*\s+)*")
}

/// `(python_regex, description)` — the order is the Python order; the first match wins.
pub fn hardline_sources() -> Vec<(String, &'static str)> {
    let rm = rm_flag_prefix();
    vec![
        (
            format!(
                "{rm}{}",
                hardline_rm_path(r"/(?:(?:\.\.?)?/)*(?:\.\.?)?\**|/ \*")
            ),
            "recursive delete of root filesystem",
        ),
        (
            format!("{rm}{}", hardline_rm_path(HARDLINE_SYSTEM_DIRS)),
            "recursive delete of system directory",
        ),
        (
            format!("{rm}{}", hardline_rm_path(r"(?:~|\$\{?HOME\}?)(?:/?|/\*)?")),
            "recursive delete of home directory",
        ),
        (r"\bmkfs(\.[a-z0-9]+)?\b".into(), "format filesystem (mkfs)"),
        (
            r"\bdd\b[^\n]*\bof=/dev/(sd|nvme|hd|mmcblk|vd|xvd)[a-z0-9]*".into(),
            "dd to raw block device",
        ),
        (
            r">\s*/dev/(sd|nvme|hd|mmcblk|vd|xvd)[a-z0-9]*\b".into(),
            "redirect to raw block device",
        ),
        (
            r":\(\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:".into(),
            "fork bomb",
        ),
        (r"\bkill\s+(-[^\s]+\s+)*-1\b".into(), "kill all processes"),
        (
            format!(r"{CMDPOS}(shutdown|reboot|halt|poweroff)\b"),
            "system shutdown/reboot",
        ),
        (
            format!(r"{CMDPOS}init\s+[06]\b"),
            "init 0/6 (shutdown/reboot)",
        ),
        (
            format!(r"{CMDPOS}systemctl\s+(poweroff|reboot|halt|kexec)\b"),
            "systemctl poweroff/reboot",
        ),
        (
            format!(r"{CMDPOS}telinit\s+[06]\b"),
            "telinit 0/6 (shutdown/reboot)",
        ),
    ]
}

/// `(python_regex, description)`; the description is the approval key.
pub fn dangerous_sources() -> Vec<(String, &'static str)> {
    let sys = system_config_path();
    let sensitive = sensitive_write_target();
    let user_sensitive = user_sensitive_write_target();
    let project = project_sensitive_write_target();
    let gateway_outside_systemd =
        "start gateway outside systemd (use 'systemctl --user restart hermes-gateway')";
    let mut v: Vec<(String, &'static str)> = vec![
        (r"\brm\s+(-[^\s]*\s+)*/".into(), "delete in root path"),
        (r"\brm\s+-[^\s]*r".into(), "recursive delete"),
        (r"\brm\s+--recursive\b".into(), "recursive delete (long flag)"),
        (
            r"\bcmd(?:\.exe)?\s+/(?:c|k)\s+.*\b(?:del|erase|rd|rmdir)\b".into(),
            "Windows cmd destructive delete",
        ),
        (
            r#"\b(?:powershell|pwsh)(?:\.exe)?\b(?:\s+-\S+)*\s+(?:-(?:command|c)\s+)?["\']?(?:remove-item|rmdir|erase|del|rd|ri|rm)\b"#.into(),
            "Windows PowerShell destructive delete",
        ),
        (
            r"\b(?:powershell|pwsh)(?:\.exe)?\b.*\s-(?:encodedcommand|enc|e)\b".into(),
            "PowerShell encoded command execution",
        ),
        (
            r"\bchmod\s+(-[^\s]*\s+)*(777|666|o\+[rwx]*w|a\+[rwx]*w)\b".into(),
            "world/other-writable permissions",
        ),
        (
            r"\bchmod\s+--recursive\b.*(777|666|o\+[rwx]*w|a\+[rwx]*w)".into(),
            "recursive world/other-writable (long flag)",
        ),
        (r"\bchown\s+(-[^\s]*)?R\s+root".into(), "recursive chown to root"),
        (
            r"\bchown\s+--recur[a-z]*\b.*root".into(),
            "recursive chown to root (long flag)",
        ),
        (r"\bmkfs\b".into(), "format filesystem"),
        (r"\bdd\s+.*if=".into(), "disk copy"),
        (r">\s*/dev/sd".into(), "write to block device"),
        (r"\bDROP\s+(TABLE|DATABASE)\b".into(), "SQL DROP"),
        (
            r"\bDELETE\s+FROM\b(?![^\n]*\bWHERE\b)".into(),
            "SQL DELETE without WHERE",
        ),
        (r"\bTRUNCATE\s+(TABLE)?\s*\w".into(), "SQL TRUNCATE"),
        (format!(r">\s*{sys}"), "overwrite system config"),
        (
            r"\bsystemctl\s+(-[^\s]+\s+)*(stop|restart|disable|mask)\b".into(),
            "stop/restart system service",
        ),
        (r"\bkill\s+-9\s+-1\b".into(), "kill all processes"),
        (r"\bpkill\s+-9\b".into(), "force kill processes"),
        (
            r"\bkillall\s+(-[^\s]*\s+)*-(9|KILL|SIGKILL)\b".into(),
            "force kill processes (killall -KILL)",
        ),
        (
            r"\bkillall\s+(-[^\s]*\s+)*-s\s+(KILL|SIGKILL|9)\b".into(),
            "force kill processes (killall -s KILL)",
        ),
        (
            r"\bkillall\s+(-[^\s]*\s+)*-r\b".into(),
            "kill processes by regex (killall -r)",
        ),
        (r":\(\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:".into(), "fork bomb"),
        (
            r"\b(curl|wget)\b.*\|\s*(?:[/\w]*/)?(?:ba)?sh(?:\s|$|-c)".into(),
            "pipe remote content to shell",
        ),
        (
            r"\b(bash|sh|zsh|ksh)\s+<\s*<?\s*\(\s*(curl|wget)\b".into(),
            "execute remote script via process substitution",
        ),
        (
            r"(?:\beval\b|\bsource\b|\.)\s*(?:\$\(\s*|`\s*)(?:curl|wget)\b".into(),
            "execute remote content via command substitution",
        ),
        (
            r"\b(base64|base32|base16)\s+(?:-[dD]|--decode)\b.*\|\s*\b(bash|sh|zsh|ksh|dash)\b".into(),
            "pipe decoded content to shell (possible command obfuscation)",
        ),
        (
            r"\bxxd\s+-r\b.*\|\s*\b(bash|sh|zsh|ksh|dash)\b".into(),
            "pipe xxd-decoded content to shell (possible command obfuscation)",
        ),
        (
            r"\becho\b[^|]*\|\s*\btr\b[^|]*\|\s*\b(bash|sh|zsh|ksh|dash)\b".into(),
            "pipe tr-transformed output to shell (possible command obfuscation)",
        ),
        (
            r"\bopenssl\b.*\b(?:base64|enc)\b[^|]*\s+-[dD]\b[^|]*\|\s*\b(bash|sh|zsh|ksh|dash)\b".into(),
            "pipe openssl-decoded content to shell (possible command obfuscation)",
        ),
        (
            format!(r#"\btee\b.*["\']?{sensitive}"#),
            "overwrite system file via tee",
        ),
        (
            format!(r#">>?\s*["\']?{sensitive}"#),
            "overwrite system file via redirection",
        ),
        (
            format!(r#"\btee\b.*["\']?{project}["\']?{WRITE_TARGET_BOUNDARY}"#),
            "overwrite project env/config via tee",
        ),
        (
            format!(r#">>?\s*["\']?{project}["\']?{WRITE_TARGET_BOUNDARY}"#),
            "overwrite project env/config via redirection",
        ),
        (r"\bxargs\s+.*\brm\b".into(), "xargs with rm"),
        (
            r"\bfind\b.*-exec(?:dir)?\s+(/\S*/)?rm\b".into(),
            "find -exec/-execdir rm",
        ),
        (r"\bfind\b.*-delete\b".into(), "find -delete"),
        (
            r"\bhermes\s+(?:-{1,2}\S+(?:\s+\S+)?\s+)*gateway\s+(stop|restart)\b".into(),
            "stop/restart hermes gateway (kills running agents)",
        ),
        (
            r"\bhermes\s+update\b".into(),
            "hermes update (restarts gateway, kills running agents)",
        ),
        (
            r"\bdocker\s+compose\s+(restart|stop|kill|down)\b".into(),
            "docker compose restart/stop/kill/down (container lifecycle)",
        ),
        (
            r"\bdocker\s+(restart|stop|kill)\b".into(),
            "docker restart/stop/kill (container lifecycle)",
        ),
        (
            r"gateway\s+run\b.*(&\s*$|&\s*;|\bdisown\b|\bsetsid\b)".into(),
            gateway_outside_systemd,
        ),
        (r"\bnohup\b.*gateway\s+run\b".into(), gateway_outside_systemd),
        (
            r"\b(pkill|killall)\b.*\b(hermes|gateway|cli\.py)\b".into(),
            "kill hermes/gateway process (self-termination)",
        ),
        (
            r"\bkill\b.*\$\(\s*(pgrep|pidof)\b".into(),
            "kill process via pgrep/pidof expansion (self-termination)",
        ),
        (
            r"\bkill\b.*`\s*(pgrep|pidof)\b".into(),
            "kill process via backtick pgrep/pidof expansion (self-termination)",
        ),
        (
            r"\blaunchctl\s+(stop|kickstart|bootout|unload|kill|disable|remove)\b.*\b(hermes|ai\.hermes)\b".into(),
            "stop/restart hermes launchd service (kills running agents)",
        ),
        (
            format!(r"\b(cp|mv|install)\b.*\s{sys}"),
            "copy/move file into system config path",
        ),
        (
            format!(r#"\b(cp|mv|install)\b.*\s["\']?{project}["\']?{COMMAND_TAIL}"#),
            "overwrite project env/config file",
        ),
        (
            format!(r#"\b(cp|mv|install)\b.*\s["\']?{sensitive}[^\s"\']*["\']?{COMMAND_TAIL}"#),
            "copy/move file into sensitive credential/SSH/shell-rc path",
        ),
        (
            format!(r#"\bsed\s+-[^\s]*i.*(?:{user_sensitive})[^\s"\']*"#),
            "in-place edit of sensitive credential/SSH/shell-rc path",
        ),
        (
            format!(r#"\bsed\s+--in-place\b.*(?:{user_sensitive})[^\s"\']*"#),
            "in-place edit of sensitive credential/SSH/shell-rc path (long flag)",
        ),
        (
            format!(r#"\b(?:perl|ruby)\b.*(?:^|\s)-[^\s]*i\b.*(?:{user_sensitive})[^\s"\']*"#),
            "in-place edit of sensitive credential/SSH/shell-rc path (perl/ruby)",
        ),
        (
            format!(r"\bsed\s+-[^\s]*i.*\s{sys}"),
            "in-place edit of system config",
        ),
        (
            format!(r"\bsed\s+--in-place\b.*\s{sys}"),
            "in-place edit of system config (long flag)",
        ),
        (
            format!(r"\bsed\s+-[^\s]*i.*(?:{HERMES_CONFIG_PATH}|{HERMES_ENV_PATH})"),
            "in-place edit of Hermes config/env",
        ),
        (
            format!(r"\bsed\s+--in-place\b.*(?:{HERMES_CONFIG_PATH}|{HERMES_ENV_PATH})"),
            "in-place edit of Hermes config/env (long flag)",
        ),
        (
            format!(
                r"\b(?:perl|ruby)\b.*(?:^|\s)-[^\s]*i\b.*(?:{HERMES_CONFIG_PATH}|{HERMES_ENV_PATH})"
            ),
            "in-place edit of Hermes config/env (perl/ruby)",
        ),
        (r"\b(bash|sh|zsh|ksh)\s+<<".into(), "shell execution via heredoc"),
        (
            r"\bgit\s+reset\s+--h(?:a(?:r(?:d)?)?)?\b".into(),
            "git reset --hard (destroys uncommitted changes)",
        ),
        (
            r"\bgit\s+push\b.*--forc[a-z]*\b".into(),
            "git force push (rewrites remote history)",
        ),
        (
            r"\bgit\s+push\b.*-f\b".into(),
            "git force push short flag (rewrites remote history)",
        ),
        (
            r"\bgit\s+clean\s+-[^\s]*f".into(),
            "git clean with force (deletes untracked files)",
        ),
        (r"\bgit\s+branch\s+-D\b".into(), "git branch force delete"),
        (
            r"\bgit\s+branch\b[^;|&\n]*?(?:-d\b|--delete\b)[^;|&\n]*?(?:-f\b|--force\b)".into(),
            "git branch force delete (long flags)",
        ),
        (
            r"\bgit\s+branch\b[^;|&\n]*?(?:-f\b|--force\b)[^;|&\n]*?(?:-d\b|--delete\b)".into(),
            "git branch force delete (long flags, force-first)",
        ),
        (
            r"\bchmod\s+\+x\b.*[;&|]+\s*\./".into(),
            "chmod +x followed by immediate execution",
        ),
        (
            r"\bsudo\b[^;|&\n]*?\s+(?:-s\b|--st[a-z]*\b|-a\b|--a[a-z]*\b)".into(),
            "sudo with privilege flag (stdin/askpass/shell/list)",
        ),
        (
            r"\bsudo\b[^;|&\n]*?\s+-[a-z]*[sa][a-z]*\b".into(),
            "sudo with combined-flag privilege escalation",
        ),
    ];
    v.shrink_to_fit();
    v
}

/// A compiled pattern with its description (also its approval key).
pub struct Pattern {
    pub source: String,
    pub regex: Regex,
    pub description: &'static str,
}

/// Python regex → Rust: drop escapes of `'` and `/`, which Python tolerates, and turn on
/// `re.IGNORECASE | re.DOTALL`.
fn compile(source: &str) -> Regex {
    let rust = source.replace(r"\'", "'").replace(r"\/", "/");
    Regex::new(&format!("(?is){rust}")).unwrap_or_else(|e| panic!("pattern {source:?}: {e}"))
}

fn compile_all(sources: Vec<(String, &'static str)>) -> Vec<Pattern> {
    sources
        .into_iter()
        .map(|(source, description)| Pattern {
            regex: compile(&source),
            source,
            description,
        })
        .collect()
}

pub static DANGEROUS: LazyLock<Vec<Pattern>> = LazyLock::new(|| compile_all(dangerous_sources()));
pub static HARDLINE: LazyLock<Vec<Pattern>> = LazyLock::new(|| compile_all(hardline_sources()));

/// The approval key older Hermes versions stored for a pattern (`_legacy_pattern_key`):
/// the text between the first two `\b`, or the first 20 characters.
pub fn legacy_pattern_key(source: &str) -> String {
    match source.split(r"\b").nth(1) {
        Some(part) if source.contains(r"\b") => part.to_owned(),
        _ => source.chars().take(20).collect(),
    }
}

/// Keys of interpreter rules Python removed; approvals stored under them still count.
pub const REMOVED_PATTERN_KEY_ALIASES: [(&str, &str); 2] = [
    (
        "script execution via -e/-c flag",
        r"(python[23]?|perl|ruby|node)\s+-[ec]\s+",
    ),
    (
        "script execution via heredoc",
        r"(python[23]?|perl|ruby|node)\s+<<",
    ),
];

/// Searches `text`; a regex engine error (backtrack limit) counts as a match so detection
/// fails closed.
pub fn is_match(regex: &Regex, text: &str) -> bool {
    regex.is_match(text).unwrap_or(true)
}
