//! A server-sent events reader for signal-cli's `GET /api/v1/events` stream: bytes in,
//! whole events out. It follows the HTML standard's parsing rules
//! (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation):
//! lines end with LF, CR or CRLF; `field:value` with one optional space after the colon;
//! several `data` lines join with LF; a blank line dispatches; a line starting with `:` is a
//! comment (signal-cli writes `:` every 15 seconds to keep the stream alive).

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field; `message` when absent, as the standard says.
    pub event: String,
    pub data: String,
}

/// What one chunk of the stream produced.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Fed {
    pub events: Vec<SseEvent>,
    /// Comments (keep-alives) seen.
    pub comments: usize,
}

#[derive(Debug, Default)]
pub struct SseReader {
    pending: Vec<u8>,
    event: Option<String>,
    data: Option<String>,
    /// The last byte was a CR, so an LF right after it ends nothing new.
    after_cr: bool,
}

impl SseReader {
    pub fn feed(&mut self, bytes: &[u8]) -> Fed {
        let mut fed = Fed::default();
        for &byte in bytes {
            let after_cr = std::mem::replace(&mut self.after_cr, byte == b'\r');
            match byte {
                b'\n' if after_cr => {}
                b'\n' | b'\r' => {
                    let line = std::mem::take(&mut self.pending);
                    self.line(&String::from_utf8_lossy(&line), &mut fed);
                }
                _ => self.pending.push(byte),
            }
        }
        fed
    }

    fn line(&mut self, line: &str, fed: &mut Fed) {
        if line.is_empty() {
            if let Some(data) = self.data.take() {
                fed.events.push(SseEvent {
                    event: self.event.take().unwrap_or_else(|| "message".to_owned()),
                    data,
                });
            }
            self.event = None;
            return;
        }
        if line.starts_with(':') {
            fed.comments += 1;
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => self.event = Some(value.to_owned()),
            "data" => match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            },
            // `id` and `retry` carry nothing signal-cli sends; unknown fields are ignored.
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_chunks_are_joined_and_comments_counted() {
        let mut reader = SseReader::default();
        let first = reader.feed(b":\nevent:receive\nda");
        assert_eq!(first.comments, 1);
        assert!(first.events.is_empty());
        let second = reader.feed(b"ta:{\"a\":1}\r\n\r\n");
        assert_eq!(
            second.events,
            [SseEvent {
                event: "receive".into(),
                data: "{\"a\":1}".into()
            }]
        );
    }

    #[test]
    fn several_data_lines_join_and_an_event_without_data_is_not_dispatched() {
        let mut reader = SseReader::default();
        let fed = reader.feed(b"data: one\ndata:two\n\nevent:x\n\n");
        assert_eq!(fed.events.len(), 1);
        assert_eq!(fed.events[0].data, "one\ntwo");
        assert_eq!(fed.events[0].event, "message");
    }
}
