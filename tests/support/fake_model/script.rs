//! The script language of the fake model: what to answer to the next request.

use std::time::Duration;

use serde_json::Value;

/// The answer to one request, rendered in whichever wire format the request used.
#[derive(Debug, Clone)]
pub enum Step {
    /// A successful reply; streamed when the request asked for a stream.
    Reply(Reply),
    /// An HTTP error with a JSON error body in the format's shape and extra headers
    /// (e.g. `retry-after`).
    Error {
        status: u16,
        headers: Vec<(String, String)>,
        message: String,
    },
    /// Streamed: the headers and the first event, then nothing, ever. Not streamed: no
    /// response at all. The client has to give up.
    Stall,
    /// The reply one event (token) at a time with `delay` between events; not streamed, the
    /// whole reply after `delay`.
    Slow { reply: Reply, delay: Duration },
    /// The reply once the test releases `gate` (one permit per gated request): a turn that
    /// is provably still running while the test acts.
    Gated {
        reply: Reply,
        gate: std::sync::Arc<tokio::sync::Semaphore>,
    },
    /// A 200 whose body (or, streamed, whose second event) is not JSON.
    Malformed,
    /// A 200 without an answer: no `choices` (chat), no content blocks (Messages), no output
    /// items (Responses).
    EmptyChoices,
    /// The stream's events up to just before the terminal one, then the end of the body.
    Truncated(Reply),
    /// Exactly this response.
    Raw {
        status: u16,
        content_type: String,
        body: String,
    },
}

impl Step {
    /// A reply held until a permit is added to the returned gate.
    pub fn gated(text: impl Into<String>) -> (Step, std::sync::Arc<tokio::sync::Semaphore>) {
        let gate = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
        (
            Step::Gated {
                reply: Reply::text(text),
                gate: gate.clone(),
            },
            gate,
        )
    }

    pub fn text(text: impl Into<String>) -> Step {
        Step::Reply(Reply::text(text))
    }

    pub fn error(status: u16) -> Step {
        Step::Error {
            status,
            headers: Vec::new(),
            message: format!("fake error {status}"),
        }
    }

    /// A 429 with `retry-after: <value>` (`None`: without the header).
    pub fn rate_limited(retry_after: Option<&str>) -> Step {
        let headers = retry_after
            .map(|value| vec![("retry-after".to_owned(), value.to_owned())])
            .unwrap_or_default();
        Step::Error {
            status: 429,
            headers,
            message: "Rate limit reached, slow down".to_owned(),
        }
    }

    /// Adds a response header to an `Error` step.
    pub fn with_header(mut self, name: &str, value: &str) -> Step {
        if let Step::Error { headers, .. } = &mut self {
            headers.push((name.to_owned(), value.to_owned()));
        }
        self
    }

    /// Sets the message of an `Error` step.
    pub fn with_message(mut self, text: &str) -> Step {
        if let Step::Error { message, .. } = &mut self {
            *message = text.to_owned();
        }
        self
    }
}

/// A model reply: any mix of reasoning, text and tool calls (several = parallel).
#[derive(Debug, Clone)]
pub struct Reply {
    pub text: Option<String>,
    pub reasoning: Option<String>,
    pub tool_calls: Vec<FakeCall>,
    /// The raw stop/finish value to send instead of the natural one (chat `finish_reason`,
    /// Messages `stop_reason`; for Responses `length`/`content_filter` make the response
    /// `incomplete`, anything else becomes its `status`).
    pub finish_reason: Option<String>,
    /// `None`: no usage in the reply at all.
    pub usage: Option<FakeUsage>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeCall {
    pub id: String,
    pub name: String,
    /// Raw JSON text.
    pub arguments: String,
}

/// Token counts in our buckets (`input` excludes cached tokens); each format renders them in
/// its own convention.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FakeUsage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub reasoning: u64,
}

impl Default for Reply {
    fn default() -> Self {
        Reply {
            text: None,
            reasoning: None,
            tool_calls: Vec::new(),
            finish_reason: None,
            usage: Some(FakeUsage {
                input: 10,
                output: 5,
                ..FakeUsage::default()
            }),
        }
    }
}

impl Reply {
    pub fn text(text: impl Into<String>) -> Reply {
        Reply {
            text: Some(text.into()),
            ..Reply::default()
        }
    }

    /// A reply with one tool call (`call_1`).
    pub fn tool_call(name: &str, arguments: Value) -> Reply {
        Reply::default().with_tool_call(name, arguments)
    }

    pub fn with_text(mut self, text: impl Into<String>) -> Reply {
        self.text = Some(text.into());
        self
    }

    pub fn with_reasoning(mut self, reasoning: impl Into<String>) -> Reply {
        self.reasoning = Some(reasoning.into());
        self
    }

    /// Adds a call with the next id (`call_1`, `call_2`, ...).
    pub fn with_tool_call(mut self, name: &str, arguments: Value) -> Reply {
        let id = format!("call_{}", self.tool_calls.len() + 1);
        self.tool_calls.push(FakeCall {
            id,
            name: name.to_owned(),
            arguments: arguments.to_string(),
        });
        self
    }

    pub fn with_usage(mut self, usage: FakeUsage) -> Reply {
        self.usage = Some(usage);
        self
    }

    pub fn without_usage(mut self) -> Reply {
        self.usage = None;
        self
    }

    pub fn with_finish_reason(mut self, reason: &str) -> Reply {
        self.finish_reason = Some(reason.to_owned());
        self
    }
}

/// Text cut into stream-sized pieces: words with their following space.
pub fn tokens(text: &str) -> Vec<String> {
    text.split_inclusive(' ').map(str::to_owned).collect()
}

/// JSON text cut into three pieces, as providers stream tool arguments.
pub fn argument_pieces(arguments: &str) -> Vec<String> {
    let chars: Vec<char> = arguments.chars().collect();
    let third = chars.len().div_ceil(3).max(1);
    chars
        .chunks(third)
        .map(|piece| piece.iter().collect())
        .collect()
}

/// One SSE frame, with an `event:` line when the format names its events.
pub fn frame(event: Option<&str>, data: &Value) -> String {
    match event {
        Some(event) => format!("event: {event}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    }
}
