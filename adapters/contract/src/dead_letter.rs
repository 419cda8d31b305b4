//! Dead letters: inbound items an adapter received but could not decode. The adapter hands
//! the raw payload to the core, which keeps it (so nothing the user sent silently vanishes)
//! and tells the user when the chat is known; the adapter acknowledges only once the core
//! answers that it is recorded, exactly as for a decoded event.

use tokio::sync::oneshot;

use crate::{RecordOutcome, SessionSource};

/// One undecodable inbound item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    pub platform: String,
    /// The platform's id for the item (Telegram update id, Discord sequence number, Slack
    /// envelope id); unique per platform, so a redelivery is recorded once.
    pub item_id: String,
    /// Where it came from, when the raw payload still shows it (so the user can be told).
    pub source: Option<SessionSource>,
    /// The payload exactly as received.
    pub raw: String,
    /// Why decoding failed.
    pub error: String,
}

/// A dead letter plus the channel on which the core confirms it was recorded.
#[derive(Debug)]
pub struct DeadLetterInbound {
    pub letter: DeadLetter,
    pub recorded: oneshot::Sender<RecordOutcome>,
}
