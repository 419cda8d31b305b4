//! What `hermesd send` sends where: the `--to` target (`platform`, `platform:chat`,
//! `platform:chat:thread`, with `--thread` as another way to name the thread) and the
//! message body (the argument, else `--file` — a text file, `-` for stdin — else piped
//! stdin), with `--subject` as a first line.

use std::io::{IsTerminal, Read};
use std::path::Path;

/// A `--to` value taken apart; an absent chat means the platform's home channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    pub platform: String,
    pub chat_id: Option<String>,
    pub thread_id: Option<String>,
}

impl Destination {
    /// `platform:chat` as the user reads it (`platform` alone for the home channel).
    pub fn label(&self) -> String {
        match (&self.chat_id, &self.thread_id) {
            (Some(chat), Some(thread)) => format!("{}:{chat}:{thread}", self.platform),
            (Some(chat), None) => format!("{}:{chat}", self.platform),
            (None, Some(thread)) => format!("{} (home channel, thread {thread})", self.platform),
            (None, None) => format!("{} (home channel)", self.platform),
        }
    }
}

fn non_empty(part: Option<&str>) -> Option<String> {
    part.map(str::trim)
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
}

/// Parses `--to` with an optional `--thread`; a thread named both ways must agree.
pub fn parse_destination(to: &str, thread: Option<&str>) -> Result<Destination, String> {
    let mut parts = to.trim().splitn(3, ':');
    let platform = non_empty(parts.next()).ok_or_else(|| {
        "--to needs a platform: telegram, telegram:<chat> or telegram:<chat>:<thread>".to_owned()
    })?;
    if !platform
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return Err(format!(
            "--to {to:?}: the platform name is letters, digits and '_' (telegram, discord, slack)"
        ));
    }
    let chat_id = non_empty(parts.next());
    let in_target = non_empty(parts.next());
    if in_target.is_some() && chat_id.is_none() {
        return Err(format!("--to {to:?}: a thread needs a chat before it"));
    }
    let flag = non_empty(thread);
    let thread_id = match (in_target, flag) {
        (Some(a), Some(b)) if a != b => {
            return Err(format!(
                "--to names thread {a} and --thread names {b}; give one"
            ));
        }
        (a, b) => a.or(b),
    };
    Ok(Destination {
        platform: platform.to_ascii_lowercase(),
        chat_id,
        thread_id,
    })
}

/// The message: the argument, else `--file` (`-` is stdin), else stdin when it is piped.
/// `Ok(None)` when there is none. A file that is not UTF-8 text is refused with a hint to
/// attach it with a `MEDIA:` tag instead.
pub fn read_body(message: Option<&str>, file: Option<&Path>) -> Result<Option<String>, String> {
    if let Some(message) = message {
        return Ok(Some(message.to_owned()));
    }
    if let Some(file) = file {
        if file == Path::new("-") {
            return read_stdin().map(Some);
        }
        let bytes =
            std::fs::read(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        return String::from_utf8(bytes).map(Some).map_err(|_| {
            format!(
                "{0} is not a UTF-8 text file; --file is the message body. To send a file as \
                 an attachment, put a MEDIA tag in the text: hermesd send --to telegram \
                 \"MEDIA:{0}\"",
                file.display()
            )
        });
    }
    if std::io::stdin().is_terminal() {
        return Ok(None);
    }
    read_stdin().map(|text| (!text.is_empty()).then_some(text))
}

fn read_stdin() -> Result<String, String> {
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read the message from stdin: {e}"))?;
    Ok(text)
}

/// The subject as the first line, a blank line, then the body.
pub fn with_subject(subject: Option<&str>, body: String) -> String {
    match subject.map(str::trim).filter(|s| !s.is_empty()) {
        Some(subject) => format!("{subject}\n\n{}", body.trim_start()),
        None => body,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dest(platform: &str, chat: Option<&str>, thread: Option<&str>) -> Destination {
        Destination {
            platform: platform.to_owned(),
            chat_id: chat.map(str::to_owned),
            thread_id: thread.map(str::to_owned),
        }
    }

    #[test]
    fn targets() {
        assert_eq!(
            parse_destination("telegram", None),
            Ok(dest("telegram", None, None))
        );
        assert_eq!(
            parse_destination("Telegram:-1001234:17", None),
            Ok(dest("telegram", Some("-1001234"), Some("17")))
        );
        assert_eq!(
            parse_destination("slack:C0123", Some("1700000000.000100")),
            Ok(dest("slack", Some("C0123"), Some("1700000000.000100")))
        );
        assert_eq!(
            parse_destination("telegram:5:9", Some("9")),
            Ok(dest("telegram", Some("5"), Some("9")))
        );
        assert_eq!(
            parse_destination("telegram", Some("4")),
            Ok(dest("telegram", None, Some("4")))
        );
        for bad in ["", ":5", "tele gram:5", "telegram::9"] {
            assert!(parse_destination(bad, None).is_err(), "{bad:?}");
        }
        assert!(parse_destination("telegram:5:9", Some("8")).is_err());
    }

    #[test]
    fn subject_goes_first() {
        assert_eq!(
            with_subject(Some("[CI]"), "\n build ok".to_owned()),
            "[CI]\n\nbuild ok"
        );
        assert_eq!(with_subject(None, "x".to_owned()), "x");
    }

    #[test]
    fn a_binary_file_is_refused_with_the_media_hint() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("chart.png");
        std::fs::write(&path, [0x89, b'P', b'N', b'G', 0xff, 0xfe]).unwrap();
        let err = read_body(None, Some(&path)).unwrap_err();
        assert!(err.contains("MEDIA:"), "{err}");
        let text = dir.path().join("report.md");
        std::fs::write(&text, "all good").unwrap();
        assert_eq!(
            read_body(None, Some(&text)),
            Ok(Some("all good".to_owned()))
        );
        assert_eq!(
            read_body(Some("arg wins"), Some(&path)),
            Ok(Some("arg wins".to_owned()))
        );
    }
}
