//! The last line of defence for secrets: every formatted log line passes through
//! [`RedactingMakeWriter`], which replaces each known secret with `***` before the line reaches
//! stderr. Types already redact themselves (`Secret`); this catches the value that slipped
//! out anyway (a URL with a token in it, a home path, a dependency's debug output).

use std::borrow::Cow;
use std::io::Write;
use std::sync::{Arc, LazyLock, RwLock};

use regex::Regex;

use tracing_subscriber::fmt::MakeWriter;

/// What a redacted value is replaced with.
pub const MASK: &str = "***";

/// Values shorter than this are not treated as secrets: masking every "true" or port number
/// would destroy the logs and protect nothing.
pub const MIN_SECRET_CHARS: usize = 8;

/// The set of secret values to mask. Cheap to clone; all clones share one set, so secrets
/// learned later (a config reload) protect every writer at once.
#[derive(Clone, Default)]
pub struct Redactor {
    secrets: Arc<RwLock<Vec<String>>>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let count = self.secrets.read().map(|s| s.len()).unwrap_or(0);
        write!(f, "Redactor({count} secrets)")
    }
}

impl Redactor {
    pub fn new(secrets: impl IntoIterator<Item = String>) -> Self {
        let redactor = Self::default();
        redactor.add_all(secrets);
        redactor
    }

    /// Adds secrets (and their JSON-escaped spelling, which is how they would appear in a
    /// JSON log line); values shorter than [`MIN_SECRET_CHARS`] are ignored.
    pub fn add_all(&self, secrets: impl IntoIterator<Item = String>) {
        let Ok(mut set) = self.secrets.write() else {
            return;
        };
        for secret in secrets {
            let secret = secret.trim().to_owned();
            if secret.chars().count() < MIN_SECRET_CHARS {
                continue;
            }
            let escaped = serde_json::to_string(&secret)
                .map(|quoted| quoted[1..quoted.len() - 1].to_owned())
                .unwrap_or_else(|_| secret.clone());
            for value in [secret, escaped] {
                if !set.contains(&value) {
                    set.push(value);
                }
            }
        }
        // Longest first, so a secret that contains another is masked whole.
        set.sort_by_key(|value| std::cmp::Reverse(value.len()));
    }

    pub fn len(&self) -> usize {
        self.secrets.read().map(|s| s.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether `value` (trimmed) is one of the secrets, spelled exactly.
    pub fn knows(&self, value: &str) -> bool {
        let value = value.trim();
        value.chars().count() >= MIN_SECRET_CHARS
            && self
                .secrets
                .read()
                .map_or(true, |set| set.iter().any(|secret| secret == value))
    }

    /// [`redact`](Self::redact), then [`mask_token_shapes`]: for text that leaves the daemon
    /// (tool output, replies, provider errors), where an unknown credential in a known shape
    /// must not pass either.
    pub fn redact_all(&self, text: &str) -> String {
        mask_token_shapes(&self.redact(text)).into_owned()
    }

    /// `text` with every secret replaced by [`MASK`].
    pub fn redact(&self, text: &str) -> String {
        let Ok(set) = self.secrets.read() else {
            // A poisoned lock means a panic mid-update; print nothing rather than risk a leak.
            return MASK.to_owned();
        };
        let mut out = text.to_owned();
        for secret in set.iter() {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), MASK);
            }
        }
        out
    }
}

/// Credential shapes recognised without knowing the value: provider keys (`sk-…`,
/// `AIza…`), Slack (`xoxb-…`, `xapp-…`), GitHub (`ghp_…`, `github_pat_…`), AWS access key
/// ids, Telegram bot tokens (`123456:AA…`), and the secret part of `Bearer …` and of a URL's
/// `user:password@`. (`password=` pairs are not a shape: masking them would also rewrite
/// source code the model reads and edits; the configured DSN's password is a known value.)
/// Each pattern's first group is kept, the rest becomes [`MASK`].
static TOKEN_SHAPES: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    [
        r"()\bsk-[A-Za-z0-9_-]{16,}",
        r"()\bAIza[0-9A-Za-z_-]{30,}",
        r"()\bxox[abposre]-[A-Za-z0-9-]{10,}",
        r"()\bxapp-[A-Za-z0-9-]{10,}",
        r"()\bgh[pousr]_[0-9A-Za-z]{20,}",
        r"()\bgithub_pat_\w{20,}",
        r"()\bAKIA[0-9A-Z]{16}\b",
        r"()\b\d{6,12}:[A-Za-z0-9_-]{30,}",
        r"(?i)(\bbearer\s+)[A-Za-z0-9._~+/=-]{8,}",
        r"(?i)(\b[a-z][a-z0-9+.-]*://[^\s/:@]+:)[^\s@/]+(@)",
    ]
    .iter()
    .map(|pattern| Regex::new(pattern).expect("token shape pattern"))
    .collect()
});

/// `text` with every credential in a known shape (see [`TOKEN_SHAPES`]) masked.
pub fn mask_token_shapes(text: &str) -> Cow<'_, str> {
    let mut out = Cow::Borrowed(text);
    for shape in TOKEN_SHAPES.iter() {
        if shape.is_match(&out) {
            let replaced = shape
                .replace_all(&out, |caps: &regex::Captures<'_>| {
                    let keep = caps.get(1).map_or("", |m| m.as_str());
                    let tail = caps.get(2).map_or("", |m| m.as_str());
                    format!("{keep}{MASK}{tail}")
                })
                .into_owned();
            out = Cow::Owned(replaced);
        }
    }
    out
}

/// A `MakeWriter` that buffers each log event and writes it, redacted, when the event ends.
/// Buffering the whole event means a secret can never be split across two writes.
#[derive(Debug, Clone)]
pub struct RedactingMakeWriter<M> {
    inner: M,
    redactor: Redactor,
}

impl<M> RedactingMakeWriter<M> {
    pub fn new(inner: M, redactor: Redactor) -> Self {
        Self { inner, redactor }
    }
}

impl<'a, M: MakeWriter<'a>> MakeWriter<'a> for RedactingMakeWriter<M> {
    type Writer = RedactingWriter<M::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        RedactingWriter {
            inner: self.inner.make_writer(),
            redactor: self.redactor.clone(),
            buffer: Vec::with_capacity(256),
        }
    }
}

/// One event's writer; see [`RedactingMakeWriter`].
#[derive(Debug)]
pub struct RedactingWriter<W: Write> {
    inner: W,
    redactor: Redactor,
    buffer: Vec<u8>,
}

impl<W: Write> RedactingWriter<W> {
    fn flush_redacted(&mut self) -> std::io::Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let text = String::from_utf8_lossy(&self.buffer);
        let redacted = self.redactor.redact(&text);
        self.buffer.clear();
        self.inner.write_all(redacted.as_bytes())?;
        self.inner.flush()
    }
}

impl<W: Write> Write for RedactingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.buffer.extend_from_slice(buf);
        Ok(buf.len())
    }

    /// Buffered bytes are written at the end of the event (drop), not on flush: a flush in
    /// the middle of an event could split a secret.
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<W: Write> Drop for RedactingWriter<W> {
    fn drop(&mut self) {
        // Nowhere to report a failed log write; losing the line is better than panicking.
        let _ = self.flush_redacted();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logging::test_sink::SharedSink;

    #[test]
    fn masks_every_occurrence_and_ignores_short_values() {
        let redactor = Redactor::new(["123456:ABCdefGHI".to_owned(), "short".to_owned()]);
        let text = "url=https://api/bot123456:ABCdefGHI/getMe again 123456:ABCdefGHI short";
        assert_eq!(
            redactor.redact(text),
            "url=https://api/bot***/getMe again *** short"
        );
    }

    #[test]
    fn the_longer_secret_wins_and_json_escapes_are_masked() {
        let redactor = Redactor::new(["abcdefgh".to_owned(), "abcdefgh-longer".to_owned()]);
        assert_eq!(redactor.redact("x abcdefgh-longer y"), "x *** y");
        let quoted = Redactor::new([r#"pa"ss\word"#.to_owned()]);
        let line = serde_json::json!({ "message": r#"key pa"ss\word"# }).to_string();
        assert!(!quoted.redact(&line).contains("ss\\\\word"), "{line}");
        assert_eq!(quoted.redact(&line), r#"{"message":"key ***"}"#);
    }

    #[test]
    fn token_shapes_are_masked_without_knowing_the_value() {
        let cases = [
            ("key sk-proj-abcdefghijklmnop1234 end", "key *** end"),
            ("slack xoxb-1234-5678-abcdefABCDEF", "slack ***"),
            (
                "bot 123456789:AAHfiqksKZ8WmR2zSjiQ7_v4TMAKdiHm9T0/getMe",
                "bot ***/getMe",
            ),
            (
                "Authorization: Bearer abc.def-ghi_jkl",
                "Authorization: Bearer ***",
            ),
            (
                "postgres://hermes:pa55-word@db:5432/x",
                "postgres://hermes:***@db:5432/x",
            ),
            ("gh ghp_0123456789abcdefghijABCDEFGHIJ", "gh ***"),
        ];
        for (text, masked) in cases {
            assert_eq!(mask_token_shapes(text), masked, "{text}");
        }
        for harmless in [
            "task-1234 done",
            "https://example.com/a:b@c",
            "12:30 today",
            "db.connect(password=get_password())",
        ] {
            assert_eq!(mask_token_shapes(harmless), harmless);
        }
    }

    #[test]
    fn known_values_are_recognised_exactly() {
        let redactor = Redactor::new(["0123456789abcdef".to_owned()]);
        assert!(redactor.knows(" 0123456789abcdef\n"));
        assert!(!redactor.knows("0123456789abcde"));
        assert!(!redactor.knows("short"));
        assert_eq!(
            redactor.redact_all("x 0123456789abcdef sk-ABCDEFGHIJKLMNOPQRS"),
            "x *** ***"
        );
    }

    #[test]
    fn secrets_added_later_protect_existing_writers() {
        let redactor = Redactor::default();
        let shared = redactor.clone();
        shared.add_all(["late-secret-value".to_owned()]);
        assert_eq!(redactor.redact("a late-secret-value b"), "a *** b");
        assert!(!format!("{redactor:?}").contains("late-secret"));
    }

    #[test]
    fn the_writer_redacts_a_secret_split_across_writes() {
        let sink = SharedSink::default();
        let target = sink.clone();
        let make = RedactingMakeWriter::new(target, Redactor::new(["0123456789abcdef".into()]));
        {
            let mut writer = make.make_writer();
            writer.write_all(b"token=01234567").unwrap();
            writer.write_all(b"89abcdef end\n").unwrap();
        }
        assert_eq!(sink.text(), "token=*** end\n");
    }
}
