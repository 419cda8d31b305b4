//! `MEDIA:<path>` tags in an agent's reply, as Hermes reads them (`extract_media` and
//! `validate_media_delivery_path` in the reference's `gateway/platforms/base.py`): when the
//! tagged path has a deliverable extension, the tag is taken out of the visible text and the file is
//! sent as a native attachment — if it is an existing regular file outside the credential
//! and system locations. Tags inside code blocks are examples, never delivered. The
//! `[[audio_as_voice]]` and `[[as_document]]` directives are removed from the text; the first
//! (outside code blocks) asks for the reply's Ogg/Opus file to go as a voice note.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;

/// The reference's `MEDIA_DELIVERY_EXTS`.
const EXTENSIONS: &[&str] = &[
    "png", "jpg", "jpeg", "gif", "webp", "bmp", "tiff", "svg", "mp4", "mov", "avi", "mkv", "webm",
    "mp3", "wav", "ogg", "opus", "m4a", "flac", "pdf", "docx", "doc", "odt", "rtf", "txt", "md",
    "epub", "xlsx", "xls", "ods", "csv", "tsv", "json", "xml", "yaml", "yml", "pptx", "ppt", "odp",
    "key", "zip", "tar", "gz", "tgz", "bz2", "xz", "7z", "rar", "apk", "ipa", "html", "htm",
];

/// System locations never delivered (the reference's `_MEDIA_DELIVERY_DENIED_PREFIXES`).
const DENIED_PREFIXES: &[&str] = &[
    "/etc", "/proc", "/sys", "/dev", "/root", "/boot", "/var/log", "/var/lib", "/var/run",
];
/// Credential directories under the user's home.
const DENIED_HOME_SUBPATHS: &[&str] = &[
    ".ssh",
    ".aws",
    ".gnupg",
    ".kube",
    ".docker",
    ".config",
    ".azure",
    ".gcloud",
    "Library/Keychains",
];
/// Secret stores and state under the Hermes home.
const DENIED_HERMES_ENTRIES: &[&str] = &[
    ".env",
    "auth.json",
    ".anthropic_oauth.json",
    "google_token.json",
    "pairing",
    "state.db",
    "state.db-wal",
    "state.db-shm",
];

/// The reference's `MEDIA_TAG_CLEANUP_RE`.
static TAG: LazyLock<Regex> = LazyLock::new(|| {
    let mut extensions = EXTENSIONS.to_vec();
    extensions.sort_by_key(|e| std::cmp::Reverse(e.len()));
    let alternation = extensions.join("|");
    // The reference's look-ahead for the end of the path becomes a captured boundary
    // (`after`), kept in the text unless it is a closing quote.
    Regex::new(&format!(
        r#"(?i)[`"']?MEDIA:[ \t]*(?P<path>`[^`\n]+`|"[^"\n]+"|'[^'\n]+'|(?:~/|/)\S+?(?:[^\S\n]+\S+?)*?\.(?:{alternation}))(?P<after>[`"']|[\s,;:)\]}}]|$)"#
    ))
    .expect("the MEDIA tag pattern compiles")
});

/// What a reply holds: its visible text and the attachment paths its tags named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extracted {
    pub text: String,
    pub paths: Vec<String>,
    /// `[[audio_as_voice]]` was in the reply (outside code blocks).
    pub as_voice: bool,
}

/// Takes the `MEDIA:` tags out of `content` (outside code blocks), in order, without repeats.
pub fn extract(content: &str) -> Extracted {
    let masked = mask_code_blocks(content);
    let mut paths: Vec<String> = Vec::new();
    let mut spans = Vec::new();
    for found in TAG.captures_iter(&masked) {
        let (Some(whole), Some(path), Some(after)) =
            (found.get(0), found.name("path"), found.name("after"))
        else {
            continue;
        };
        let closing_quote = matches!(after.as_str(), "`" | "\"" | "'");
        let end = if closing_quote {
            after.end()
        } else {
            after.start()
        };
        let path = path
            .as_str()
            .trim_matches(|c| matches!(c, '`' | '"' | '\''));
        let path = path.trim();
        if path.is_empty() {
            continue;
        }
        // A tag alone on its line takes the line with it.
        let line_start = content[..whole.start()].rfind('\n').map_or(0, |i| i + 1);
        let rest = &content[end..];
        let line_end = rest.find('\n').map_or(content.len(), |i| end + i + 1);
        let alone = content[line_start..whole.start()].trim().is_empty()
            && content[end..line_end].trim().is_empty();
        spans.push(if alone {
            line_start.max(spans_end(&spans))..line_end
        } else {
            whole.start()..end
        });
        if !paths.iter().any(|p| p == path) {
            paths.push(path.to_owned());
        }
    }
    let mut text = String::with_capacity(content.len());
    let mut at = 0;
    for span in spans {
        text.push_str(&content[at..span.start]);
        at = span.end;
    }
    text.push_str(&content[at..]);
    let as_voice = masked.contains("[[audio_as_voice]]");
    let text = text
        .replace("[[audio_as_voice]]", "")
        .replace("[[as_document]]", "");
    Extracted {
        text: tidy(&text),
        paths,
        as_voice,
    }
}

/// Blanks fenced code blocks byte for byte (so offsets stay valid and UTF-8 boundaries hold:
/// every masked byte becomes a space).
fn mask_code_blocks(content: &str) -> String {
    let mut masked = String::with_capacity(content.len());
    let mut inside = false;
    for line in content.split_inclusive('\n') {
        let fence = line.trim_start().starts_with("```");
        if inside || fence {
            // Every byte of a masked character becomes a space: offsets stay valid.
            for c in line.chars() {
                if c == '\n' {
                    masked.push('\n');
                } else {
                    masked.extend(std::iter::repeat_n(' ', c.len_utf8()));
                }
            }
            if fence {
                inside = !inside;
            }
        } else {
            masked.push_str(line);
        }
    }
    masked
}

fn spans_end(spans: &[std::ops::Range<usize>]) -> usize {
    spans.last().map_or(0, |s| s.end)
}

/// Removes the trailing spaces and the leading/trailing blank lines removed tags leave.
fn tidy(text: &str) -> String {
    let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
    let first = lines
        .iter()
        .position(|l| !l.is_empty())
        .unwrap_or(lines.len());
    let last = lines
        .iter()
        .rposition(|l| !l.is_empty())
        .map_or(first, |i| i + 1);
    lines[first..last.max(first)].join("\n")
}

/// Where attachments may not come from: the Hermes home's secrets and the user's home.
#[derive(Debug, Clone)]
pub struct MediaPolicy {
    pub hermes_home: PathBuf,
    pub user_home: Option<PathBuf>,
}

impl MediaPolicy {
    /// The file to send for a tag's `path`, or why it is refused.
    pub fn validate(&self, path: &str) -> Result<PathBuf, &'static str> {
        let expanded = match (path.strip_prefix("~/"), &self.user_home) {
            (Some(rest), Some(home)) => home.join(rest),
            (Some(_), None) => return Err("no home directory to expand ~ in"),
            (None, _) => PathBuf::from(path),
        };
        if !expanded.is_absolute() {
            return Err("not an absolute path");
        }
        let resolved = std::fs::canonicalize(&expanded).map_err(|_| "no such file")?;
        if !resolved.is_file() {
            return Err("not a regular file");
        }
        if DENIED_PREFIXES
            .iter()
            .any(|prefix| resolved.starts_with(prefix))
        {
            return Err("a system location");
        }
        if let Some(home) = self.user_home.as_deref().and_then(canonical)
            && DENIED_HOME_SUBPATHS
                .iter()
                .any(|sub| resolved.starts_with(home.join(sub)))
        {
            return Err("a credential directory");
        }
        if let Some(hermes) = canonical(&self.hermes_home)
            && DENIED_HERMES_ENTRIES
                .iter()
                .any(|entry| resolved.starts_with(hermes.join(entry)))
        {
            return Err("a Hermes secret or state file");
        }
        Ok(resolved)
    }
}

fn canonical(path: &Path) -> Option<PathBuf> {
    std::fs::canonicalize(path).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_voice_directive_is_noticed_outside_code_blocks_only() {
        let spoken = extract("[[audio_as_voice]]\nMEDIA:/tmp/reply_1.ogg\nHello there.");
        assert!(spoken.as_voice);
        assert_eq!(spoken.paths, ["/tmp/reply_1.ogg"]);
        assert_eq!(spoken.text, "Hello there.");
        let example = extract("Write it like this:\n```\n[[audio_as_voice]]\n```\n");
        assert!(!example.as_voice);
        assert!(!extract("MEDIA:/tmp/a.ogg").as_voice);
    }

    #[test]
    fn tags_are_taken_out_of_the_text_in_order_without_repeats() {
        let reply = "Here is the chart:\nMEDIA:/tmp/out/chart.png\nand the report MEDIA: \"/tmp/My Docs/report.pdf\" too.\n[[as_document]]\nMEDIA:/tmp/out/chart.png";
        let extracted = extract(reply);
        assert_eq!(
            extracted.paths,
            ["/tmp/out/chart.png", "/tmp/My Docs/report.pdf"]
        );
        assert_eq!(extracted.text, "Here is the chart:\nand the report  too.");
    }

    #[test]
    fn unknown_extensions_relative_paths_and_code_blocks_stay_text() {
        for reply in [
            "MEDIA:/tmp/tool.exe is not deliverable",
            "MEDIA:chart.png is relative",
            "Example:\n```\nMEDIA:/tmp/example.png\n```",
        ] {
            let extracted = extract(reply);
            assert!(extracted.paths.is_empty(), "{reply}: {extracted:?}");
            assert_eq!(extracted.text, reply);
        }
    }

    #[test]
    fn a_code_block_with_multibyte_text_keeps_offsets() {
        let reply = "```\n世界 MEDIA:/tmp/x.png\n```\nMEDIA:/tmp/y.png 😀";
        let extracted = extract(reply);
        assert_eq!(extracted.paths, ["/tmp/y.png"]);
        assert_eq!(
            extracted.text,
            "```\n世界 MEDIA:/tmp/x.png\n```\n 😀".trim_end()
        );
    }

    #[test]
    fn validation_refuses_secrets_system_paths_and_missing_files() {
        let dir = tempfile::tempdir().unwrap();
        let hermes = dir.path().join("hermes");
        let user = dir.path().join("user");
        std::fs::create_dir_all(hermes.join("cache")).unwrap();
        std::fs::create_dir_all(user.join(".ssh")).unwrap();
        for file in [
            hermes.join(".env"),
            hermes.join("cache/chart.png"),
            user.join(".ssh/id_rsa.txt"),
            user.join("notes.md"),
        ] {
            std::fs::write(file, "x").unwrap();
        }
        std::os::unix::fs::symlink(hermes.join(".env"), user.join("innocent.txt")).unwrap();
        let policy = MediaPolicy {
            hermes_home: hermes.clone(),
            user_home: Some(user.clone()),
        };
        let ok = |p: &str| policy.validate(p);
        assert!(ok(&hermes.join("cache/chart.png").display().to_string()).is_ok());
        assert!(ok("~/notes.md").is_ok());
        assert_eq!(
            ok(&hermes.join(".env").display().to_string()),
            Err("a Hermes secret or state file")
        );
        assert_eq!(ok("~/innocent.txt"), Err("a Hermes secret or state file"));
        assert_eq!(ok("~/.ssh/id_rsa.txt"), Err("a credential directory"));
        assert_eq!(ok("/etc/hostname"), Err("a system location"));
        assert_eq!(ok("~/missing.png"), Err("no such file"));
        assert_eq!(ok("relative.png"), Err("not an absolute path"));
        assert_eq!(ok(&user.display().to_string()), Err("not a regular file"));
    }
}
