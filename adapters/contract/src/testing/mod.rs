//! Test support shared by every adapter (cargo feature `testing`): stand-ins for the core an
//! adapter talks to ([`TestCore`] records and dedupes like the real one, [`ManualCore`] lets
//! the test give each answer), and the compliance suite every adapter must pass
//! ([`run_compliance_suite`] over a [`ComplianceRig`] the adapter's tests implement).
//!
//! Only the glue that knows one platform stays in an adapter's tests: how to start its fake
//! platform, how to push a message into it and how to read what the adapter did there.

mod compliance;
mod core;

use std::time::Duration;

pub use compliance::{
    ComplianceRig, a_dead_letter_is_kept_and_the_next_message_flows,
    a_failed_record_is_not_acknowledged_and_comes_back, a_rate_limit_is_typed_with_its_wait,
    acknowledges_only_after_the_record, capabilities_match_behaviour, run_compliance_suite,
};
pub use core::{ManualCore, TestCore};

/// How long a test waits for something the adapter should do soon; generous because the
/// shared test machines are slow, never a sleep.
pub const WAIT: Duration = Duration::from_secs(30);
