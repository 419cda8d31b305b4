//! What one fault run does, drawn from its seed: the messages each chat sends (in waves, one
//! message per chat per wave), which of them make the model run a tool, and the faults, each
//! begun after one wave is posted and lifted after the next.

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use crate::cluster_support::USERS;

/// The seeds CI runs when `HERMES_FAULT_SEED` is not set (one per test, so a failure names
/// one seed; set the variable to replay it, or to try another). The kill test's seed (11)
/// was picked because it kills an instance between a claim and its send and lets the others
/// take over before the restart.
pub const SEEDS: [u64; 6] = [
    0x5eed_0001,
    0x5eed_7a11,
    0x5eed_c0de,
    0x5eed_f00d,
    11,
    0x5eed_0ace,
];

/// The seed of the test numbered `n`: `HERMES_FAULT_SEED` (decimal or `0x` hex) if set.
pub fn seed(n: usize) -> u64 {
    match std::env::var("HERMES_FAULT_SEED") {
        Ok(text) => {
            let text = text.trim();
            let parsed = match text.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => text.parse(),
            };
            parsed.unwrap_or_else(|_| panic!("HERMES_FAULT_SEED={text} is not a number"))
        }
        Err(_) => SEEDS[n % SEEDS.len()],
    }
}

/// Instances per run.
pub const INSTANCES: usize = 3;

/// The kinds of fault a run can inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// SIGSTOP of the first instance to claim a reply, between the claim's commit and the
    /// send, held until another instance took the reply over; then SIGCONT.
    PauseAfterClaim,
    /// SIGSTOP of one instance while a lease renewal of its is answered, held until its
    /// instance lease ran out and its owed replies moved on; then SIGCONT.
    PauseInRenewal,
    /// Latency on one instance's database traffic while a wave is posted, then a stall
    /// until its instance lease ran out; then both lifted.
    SlowThenStalledDatabase,
    /// One instance's wall clock shifted by minutes for the whole run.
    SkewedClock,
    /// kill -9 of one instance at a chosen point, then a restart.
    Kill9,
}

impl FaultKind {
    /// The kind `HERMES_FAULT_KINDS` calls `name`.
    pub fn from_name(name: &str) -> Self {
        match name {
            "pause-after-claim" => Self::PauseAfterClaim,
            "pause-in-renewal" => Self::PauseInRenewal,
            "slow-then-stalled" => Self::SlowThenStalledDatabase,
            "skewed-clock" => Self::SkewedClock,
            "kill9" => Self::Kill9,
            other => panic!(
                "unknown fault kind {other:?} in HERMES_FAULT_KINDS (pause-after-claim, \
                 pause-in-renewal, slow-then-stalled, skewed-clock, kill9)"
            ),
        }
    }
}

/// Where a kill -9 lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillPoint {
    /// The first instance to commit a reply's claim, before it sends.
    AfterClaim,
    /// The first instance to commit a history row (a turn under way).
    AtHistoryWrite,
    /// A chosen instance, right after a wave was posted.
    AfterPosting(usize),
}

/// A fault with the choices the seed made for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    PauseAfterClaim,
    PauseInRenewal {
        instance: usize,
    },
    SlowThenStalledDatabase {
        instance: usize,
        latency_ms: u64,
    },
    SkewedClock {
        instance: usize,
        seconds: i64,
    },
    Kill9 {
        point: KillPoint,
        /// Restart at once, or only once the others took its work over.
        restart_at_once: bool,
    },
}

/// One message: the chat (a DM: chat = user), its update id, and the tag that names it in
/// the model's answers and the tool's output.
#[derive(Debug, Clone)]
pub struct Message {
    pub chat: i64,
    pub update_id: i64,
    pub tag: String,
    pub tool: bool,
    /// The instance it is posted to first.
    pub instance: usize,
}

impl Message {
    pub fn text(&self) -> String {
        match self.tool {
            true => format!("please run the tool for {}", self.tag),
            false => format!("please greet {}", self.tag),
        }
    }
}

/// A whole run.
#[derive(Debug)]
pub struct Plan {
    pub seed: u64,
    /// `waves[w]`: one message per chat.
    pub waves: Vec<Vec<Message>>,
    /// The clock skew, applied from the start, if any.
    pub skew: Option<Fault>,
    /// `faults[w]` begins after wave `w` is posted and is lifted after wave `w + 1`.
    pub faults: Vec<Fault>,
}

impl Plan {
    /// A run injecting `kinds` (in the seed's order when `shuffle`).
    pub fn new(seed: u64, kinds: &[FaultKind], shuffle: bool) -> Plan {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut kinds = kinds.to_vec();
        if shuffle {
            kinds.shuffle(&mut rng);
        }
        let mut skew = None;
        let mut faults = Vec::new();
        for kind in kinds {
            let fault = match kind {
                FaultKind::PauseAfterClaim => Fault::PauseAfterClaim,
                FaultKind::PauseInRenewal => Fault::PauseInRenewal {
                    instance: rng.random_range(0..INSTANCES),
                },
                FaultKind::SlowThenStalledDatabase => Fault::SlowThenStalledDatabase {
                    instance: rng.random_range(0..INSTANCES),
                    latency_ms: rng.random_range(20..=300),
                },
                FaultKind::SkewedClock => {
                    let minutes = rng.random_range(2..=10);
                    let sign = if rng.random_bool(0.5) { 1 } else { -1 };
                    skew = Some(Fault::SkewedClock {
                        instance: rng.random_range(0..INSTANCES),
                        seconds: sign * minutes * 60,
                    });
                    continue;
                }
                FaultKind::Kill9 => Fault::Kill9 {
                    point: match rng.random_range(0..3) {
                        0 => KillPoint::AfterClaim,
                        1 => KillPoint::AtHistoryWrite,
                        _ => KillPoint::AfterPosting(rng.random_range(0..INSTANCES)),
                    },
                    restart_at_once: rng.random_bool(0.5),
                },
            };
            faults.push(fault);
        }
        // A clean wave first, one during each fault, one after the last: at least three.
        let wave_count = (faults.len() + 2).max(3);
        let waves = (0..wave_count)
            .map(|w| {
                USERS
                    .iter()
                    .enumerate()
                    .map(|(c, &chat)| Message {
                        chat,
                        update_id: (w * USERS.len() + c + 1) as i64,
                        tag: format!("msg{c}x{w}z"),
                        tool: rng.random_bool(0.35),
                        instance: rng.random_range(0..INSTANCES),
                    })
                    .collect()
            })
            .collect();
        Plan {
            seed,
            waves,
            skew,
            faults,
        }
    }

    /// Every message, chat by chat in the order each chat sent them.
    pub fn messages(&self) -> impl Iterator<Item = &Message> {
        self.waves.iter().flatten()
    }

    /// The extra environment of each instance: the skewed one's faked wall clock.
    pub fn instance_env(&self) -> Vec<Vec<(String, String)>> {
        let mut env = vec![Vec::new(); INSTANCES];
        if let Some(Fault::SkewedClock { instance, seconds }) = self.skew {
            env[instance] = vec![
                ("LD_PRELOAD".to_owned(), faketime_library()),
                ("FAKETIME".to_owned(), format!("{seconds:+}s")),
                // tokio's timers and every deadline run on the monotonic clock: left true.
                ("FAKETIME_DONT_FAKE_MONOTONIC".to_owned(), "1".to_owned()),
            ];
        }
        env
    }

    /// The run's schedule in a few lines, for the report.
    pub fn describe(&self) -> String {
        let mut out = format!("seed {:#x}", self.seed);
        if let Some(skew) = self.skew {
            out.push_str(&format!("\n  from the start: {skew:?}"));
        }
        for (w, fault) in self.faults.iter().enumerate() {
            out.push_str(&format!("\n  after wave {w}: {fault:?}"));
        }
        let tools: Vec<&str> = self
            .messages()
            .filter(|m| m.tool)
            .map(|m| m.tag.as_str())
            .collect();
        out.push_str(&format!("\n  tool calls for {tools:?}"));
        out
    }
}

/// Debian's multithreaded libfaketime (package `libfaketime`), under any architecture's
/// library directory.
pub fn faketime_library() -> String {
    let found = std::fs::read_dir("/usr/lib")
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path().join("faketime/libfaketimeMT.so.1"))
        .find(|path| path.exists());
    match found {
        Some(path) => path.display().to_string(),
        None => panic!(
            "libfaketime is not installed (Debian package `libfaketime`; .ci/test installs it)"
        ),
    }
}
