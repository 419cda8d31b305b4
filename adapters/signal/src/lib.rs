//! hermesd's Signal adapter, speaking to signal-cli's HTTP daemon
//! (`signal-cli -a ACCOUNT daemon --http HOST:PORT`, signal-cli-jsonrpc(5)): messages arrive
//! on its server-sent event stream, everything outbound is a JSON-RPC call. Chats, message
//! ids and the allowlists follow Hermes' Signal adapter; approvals are answered by a
//! numbered emoji reaction because Signal has no buttons.
//!
//! signal-cli acknowledges a message to Signal's servers once it has handed it to the
//! listeners open at that moment; it keeps none for later. Run it with
//! `--receive-mode=on-connection` and it fetches only while hermesd's event stream is open,
//! so messages sent while hermesd is down wait on the servers (tests/signal_e2e.rs).
#![forbid(unsafe_code)]

mod adapter;
pub mod envelope;
pub mod format;
pub mod outbound;
mod prompts;
pub mod rpc;
pub mod settings;
pub mod sse;

pub use adapter::{MESSAGE_LIMIT, SignalAdapter};
pub use envelope::PLATFORM;
pub use prompts::CHOICES;
pub use settings::{Groups, Settings};
