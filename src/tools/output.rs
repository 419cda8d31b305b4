//! Bounded command output: a 40 % head / 60 % tail window filled while a process streams
//! (Python `_BoundedOutputCollector`), an incremental UTF-8 decoder, and the truncation
//! notice the model sees.

use std::collections::VecDeque;

/// Formats `n` with thousands separators, as Python's `{n:,}`.
pub fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// Keeps at most `max_chars` characters of a stream: the first 40 % and the last 60 %.
#[derive(Debug)]
pub struct BoundedOutput {
    max_chars: usize,
    head_limit: usize,
    tail_limit: usize,
    head: String,
    head_chars: usize,
    tail: VecDeque<char>,
    total_chars: usize,
}

impl BoundedOutput {
    pub fn new(max_chars: usize) -> Self {
        let max_chars = max_chars.max(1);
        let head_limit = max_chars * 2 / 5;
        Self {
            max_chars,
            head_limit,
            tail_limit: max_chars - head_limit,
            head: String::new(),
            head_chars: 0,
            tail: VecDeque::new(),
            total_chars: 0,
        }
    }

    pub fn total_chars(&self) -> usize {
        self.total_chars
    }

    pub fn push(&mut self, text: &str) {
        for ch in text.chars() {
            self.total_chars += 1;
            if self.head_chars < self.head_limit {
                self.head.push(ch);
                self.head_chars += 1;
                continue;
            }
            if self.tail_limit == 0 {
                continue;
            }
            if self.tail.len() == self.tail_limit {
                self.tail.pop_front();
            }
            self.tail.push_back(ch);
        }
    }

    /// The retained text within `max_chars`, with a truncation notice when anything was
    /// dropped and `suffix` (a status line) always kept at the end.
    pub fn render(&self, suffix: &str) -> String {
        let suffix_chars = suffix.chars().count();
        if suffix_chars >= self.max_chars {
            return suffix.chars().skip(suffix_chars - self.max_chars).collect();
        }
        let available = self.max_chars - suffix_chars;
        let tail: String = self.tail.iter().collect();
        if self.total_chars <= available {
            return format!("{}{tail}{suffix}", self.head);
        }
        let mut notice = String::new();
        for _ in 0..4 {
            let budget = available.saturating_sub(notice.chars().count());
            let head_chars = budget * 2 / 5;
            let tail_chars = budget - head_chars;
            let omitted = self.total_chars.saturating_sub(head_chars + tail_chars);
            let updated = format!(
                "\n\n... [output cut: {} of {} characters dropped from the middle] ...\n\n",
                thousands(omitted),
                thousands(self.total_chars)
            );
            if updated == notice {
                break;
            }
            notice = updated;
        }
        let budget = available.saturating_sub(notice.chars().count());
        let head_chars = budget * 2 / 5;
        let tail_chars = budget - head_chars;
        let head: String = self.head.chars().take(head_chars).collect();
        let tail_len = self.tail.len();
        let tail: String = self
            .tail
            .iter()
            .skip(tail_len.saturating_sub(tail_chars))
            .collect();
        let notice: String = notice.chars().take(available).collect();
        format!("{head}{notice}{tail}{suffix}")
    }
}

/// Keeps 40 % head and 60 % tail of an over-long string with the terminal tool's notice
/// (`"... [output cut: N of M characters dropped from the middle] ..."`).
pub fn truncate_head_tail(output: &str, max_chars: usize) -> String {
    let total = output.chars().count();
    if total <= max_chars {
        return output.to_owned();
    }
    let head_chars = max_chars * 2 / 5;
    let tail_chars = max_chars - head_chars;
    let omitted = total - head_chars - tail_chars;
    let head: String = output.chars().take(head_chars).collect();
    let tail: String = output.chars().skip(total - tail_chars).collect();
    format!(
        "{head}\n\n... [output cut: {omitted} of {total} characters dropped from the middle] ...\n\n{tail}"
    )
}

/// Decodes UTF-8 arriving in arbitrary chunks, replacing invalid bytes with U+FFFD and
/// carrying a split multi-byte character over to the next chunk.
#[derive(Debug, Default)]
pub struct Utf8Decoder {
    pending: Vec<u8>,
}

impl Utf8Decoder {
    pub fn decode(&mut self, chunk: &[u8]) -> String {
        self.pending.extend_from_slice(chunk);
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(text) => {
                    out.push_str(text);
                    self.pending.clear();
                    return out;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    out.push_str(&String::from_utf8_lossy(&self.pending[..valid]));
                    match e.error_len() {
                        Some(bad) => {
                            out.push('\u{FFFD}');
                            self.pending.drain(..valid + bad);
                        }
                        None => {
                            // An incomplete character at the end: wait for more bytes.
                            self.pending.drain(..valid);
                            return out;
                        }
                    }
                }
            }
        }
    }

    /// Flushes a trailing incomplete character as U+FFFD.
    pub fn finish(&mut self) -> String {
        if self.pending.is_empty() {
            String::new()
        } else {
            self.pending.clear();
            "\u{FFFD}".to_owned()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_output_is_kept_whole() {
        let mut out = BoundedOutput::new(100);
        out.push("hello ");
        out.push("world");
        assert_eq!(out.render("\n[done]"), "hello world\n[done]");
    }

    #[test]
    fn long_output_keeps_head_and_tail_within_the_cap() {
        let mut out = BoundedOutput::new(200);
        for i in 0..1000 {
            out.push(&format!("{i:04}\n"));
        }
        let rendered = out.render("");
        assert!(rendered.chars().count() <= 200, "{}", rendered.len());
        assert!(rendered.starts_with("0000\n"));
        assert!(rendered.ends_with("0999\n"));
        assert!(rendered.contains("... [output cut: "));
        assert!(rendered.contains(" of 5,000 characters dropped from the middle] ..."));
        let with_suffix = out.render("\n[Command timed out after 5s]");
        assert!(with_suffix.ends_with("\n[Command timed out after 5s]"));
        assert!(with_suffix.chars().count() <= 200);
    }

    #[test]
    fn plain_truncation_uses_the_terminal_notice() {
        let s = "a".repeat(100);
        let t = truncate_head_tail(&s, 10);
        assert_eq!(
            t,
            format!(
                "aaaa\n\n... [output cut: 90 of 100 characters dropped from the middle] ...\n\naaaaaa"
            )
        );
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(thousands(12), "12");
    }

    #[test]
    fn decoder_handles_split_and_invalid_bytes() {
        let mut d = Utf8Decoder::default();
        let bytes = "é€".as_bytes();
        assert_eq!(d.decode(&bytes[..1]), "");
        assert_eq!(d.decode(&bytes[1..3]), "é");
        assert_eq!(d.decode(&bytes[3..]), "€");
        assert_eq!(d.decode(&[b'a', 0xff, b'b']), "a\u{FFFD}b");
        assert_eq!(d.decode(&[0xe2, 0x82]), "");
        assert_eq!(d.finish(), "\u{FFFD}");
    }
}
