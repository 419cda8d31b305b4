//! A small server-sent-events parser: bytes in any chunking → events. Handles multi-line
//! `data:`, comments (`: ping`), `event:` names, LF/CRLF/CR line ends and a UTF-8 split across
//! chunks. `[DONE]` is data like any other; the chat-completions reader gives it its meaning.

/// One dispatched event. `data` is the `data:` lines joined with `\n`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    pub event: Option<String>,
    pub data: String,
}

/// Unnamed events carrying `payloads` as their data: test input for each mode's stream
/// reader.
#[cfg(test)]
pub(crate) fn data_events(payloads: &[&str]) -> Vec<SseEvent> {
    payloads
        .iter()
        .map(|data| SseEvent {
            event: None,
            data: (*data).to_owned(),
        })
        .collect()
}

/// A line longer than this is not an SSE stream we can use (and would otherwise grow memory
/// without bound).
const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("an event-stream line exceeded {MAX_LINE_BYTES} bytes")]
pub struct LineTooLong;

/// Incremental parser state.
#[derive(Debug, Default)]
pub struct SseParser {
    buffer: Vec<u8>,
    event: Option<String>,
    data: Option<String>,
    started: bool,
}

impl SseParser {
    /// Feeds one chunk; returns the events it completed.
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<SseEvent>, LineTooLong> {
        self.buffer.extend_from_slice(chunk);
        let mut events = Vec::new();
        let mut start = 0;
        while let Some(offset) = self.buffer[start..]
            .iter()
            .position(|b| *b == b'\n' || *b == b'\r')
        {
            let end = start + offset;
            let next = match self.buffer[end] {
                b'\r' if end + 1 == self.buffer.len() => break, // a '\n' may follow in the next chunk
                b'\r' if self.buffer[end + 1] == b'\n' => end + 2,
                _ => end + 1,
            };
            let line = String::from_utf8_lossy(&self.buffer[start..end]).into_owned();
            self.line(&line, &mut events);
            start = next;
        }
        self.buffer.drain(..start);
        if self.buffer.len() > MAX_LINE_BYTES {
            return Err(LineTooLong);
        }
        Ok(events)
    }

    /// The event left when the stream ends without its final blank line (servers that close
    /// right after the last `data:` line); strict SSE would drop it.
    pub fn finish(mut self) -> Option<SseEvent> {
        let mut events = Vec::new();
        if !self.buffer.is_empty() {
            let line = String::from_utf8_lossy(&self.buffer).into_owned();
            let line = line.strip_suffix('\r').unwrap_or(&line).to_owned();
            self.line(&line, &mut events);
        }
        self.line("", &mut events);
        events.pop()
    }

    fn line(&mut self, line: &str, events: &mut Vec<SseEvent>) {
        let line = if self.started {
            line
        } else {
            self.started = true;
            line.strip_prefix('\u{feff}').unwrap_or(line)
        };
        if line.is_empty() {
            let event = self.event.take();
            if let Some(data) = self.data.take() {
                events.push(SseEvent { event, data });
            }
            return;
        }
        if line.starts_with(':') {
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
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_in_chunks(input: &[u8], chunk: usize) -> Vec<SseEvent> {
        let mut parser = SseParser::default();
        let mut events = Vec::new();
        for piece in input.chunks(chunk) {
            events.extend(parser.push(piece).unwrap());
        }
        events.extend(parser.finish());
        events
    }

    fn data(event: Option<&str>, data: &str) -> SseEvent {
        SseEvent {
            event: event.map(str::to_owned),
            data: data.to_owned(),
        }
    }

    #[test]
    fn every_chunking_gives_the_same_events() {
        let input =
            "\u{feff}: comment\r\nevent: message_start\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\n\
                     data: héllo\n\n:ping\n\ndata:no-space\rid: 7\r\rdata: [DONE]\n\n"
                .as_bytes();
        let expected = vec![
            data(Some("message_start"), "{\"a\":\n1}"),
            data(None, "héllo"),
            data(None, "no-space"),
            data(None, "[DONE]"),
        ];
        for chunk in 1..=input.len() {
            assert_eq!(
                parse_in_chunks(input, chunk),
                expected,
                "chunk size {chunk}"
            );
        }
    }

    #[test]
    fn a_final_event_without_a_blank_line_is_kept() {
        assert_eq!(parse_in_chunks(b"data: last", 4), vec![data(None, "last")]);
        assert_eq!(
            parse_in_chunks(b"data: last\r", 3),
            vec![data(None, "last")]
        );
        assert_eq!(parse_in_chunks(b"event: x\n\n", 3), vec![]);
    }

    #[test]
    fn empty_data_lines_still_dispatch() {
        assert_eq!(parse_in_chunks(b"data\n\n", 2), vec![data(None, "")]);
    }
}
