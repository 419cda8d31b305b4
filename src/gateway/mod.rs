//! The gateway core: routing, delivery and the runner that owns the adapters.

pub mod adapter_health;
pub mod admin;
pub mod api_server;
pub mod authorize;
pub mod chunk;
pub mod delivery;
pub mod first_run;
pub mod incident;
pub mod instance_lock;
pub mod lock_record;
pub mod media_tags;
pub mod metrics;
pub mod pairing;
pub mod platforms;
pub mod process_info;
pub mod reload;
pub mod reset;
pub mod router;
pub mod routing;
pub mod runner;
pub mod runtime_status;
pub mod sd_notify;
pub mod session_key;
pub mod supervisor;
pub mod token_lock;
pub mod typing;
