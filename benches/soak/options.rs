//! The soak's command line: how long, which seed, how many users, how often faults and
//! kills come. Unknown arguments (cargo passes `--bench`) are ignored.

use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Options {
    /// How long the load runs (the quiescence wait and shutdown come on top).
    pub duration: Duration,
    pub seed: u64,
    /// Simulated users per platform; each sends its next message once answered.
    pub users: usize,
    /// Mean gap between injected faults.
    pub fault_every: Duration,
    /// Mean gap between `kill -9`s of the daemon.
    pub kill_every: Duration,
    /// MiB of conversations state.db holds before the daemon first starts (0: empty).
    pub seed_db_mb: u64,
}

impl Options {
    pub fn from_args() -> Options {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let raw = |name: &str| -> Option<&String> {
            let at = args.iter().position(|a| a == name)?;
            args.get(at + 1)
        };
        let value = |name: &str| -> Option<f64> {
            raw(name).map(|v| {
                v.parse()
                    .unwrap_or_else(|_| panic!("{name} wants a number, got {v:?}"))
            })
        };
        let duration = match (value("--seconds"), value("--minutes")) {
            (Some(s), _) => Duration::from_secs_f64(s),
            (None, Some(m)) => Duration::from_secs_f64(m * 60.0),
            (None, None) => Duration::from_secs(600),
        };
        Options {
            duration,
            seed: raw("--seed").map_or_else(rand::random, |s| {
                s.parse()
                    .unwrap_or_else(|_| panic!("--seed wants an unsigned integer, got {s:?}"))
            }),
            users: value("--users").map_or(12, |u| u as usize),
            fault_every: Duration::from_secs_f64(value("--fault-every-secs").unwrap_or(4.0)),
            kill_every: Duration::from_secs_f64(value("--kill-every-secs").unwrap_or(180.0)),
            seed_db_mb: value("--seed-db-mb").map_or(0, |m| m as u64),
        }
    }
}
