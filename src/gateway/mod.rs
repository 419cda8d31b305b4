//! The gateway core: routing, delivery and the runner that owns the adapters.

pub mod authorize;
pub mod chunk;
pub mod pairing;
pub mod session_key;
