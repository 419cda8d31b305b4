//! The seeded fault harness of the PostgreSQL cluster (issue 28): each run starts three
//! real instances, each reaching PostgreSQL through a proxy of its own
//! (`tests/support/pg_proxy.rs`), posts waves of Telegram messages from four chats spread
//! over the instances' webhooks, injects the faults its seed chose at exact points (SIGSTOP
//! between a reply's claim and its send, SIGSTOP during a lease renewal, a slow then stalled
//! database link, one instance's wall clock shifted by minutes, kill -9 and restart), and
//! then checks every message's promises (`cluster_faults/checks.rs`): exactly once, in
//! order, nothing lost.
//!
//! Every run prints its seed and schedule; a failure repeats them with each instance's log
//! tail. `HERMES_FAULT_SEED=<n>` replays one seed in every test.

#[path = "cluster_faults/checks.rs"]
mod checks;
#[path = "support/cluster.rs"]
mod cluster_support;
#[path = "cluster_faults/plan.rs"]
mod plan;
mod support;
#[path = "cluster_faults/traffic.rs"]
mod traffic;

use std::time::{Duration, Instant};

use cluster_support::{ClusterRig, WAIT};
use plan::{Fault, FaultKind, INSTANCES, KillPoint, Plan};
use sqlx::postgres::PgPool;
use support::pg_proxy::{Caught, Trap};
use traffic::AnswerGate;

/// Short leases keep takeovers quick.
const LEASE_SECONDS: f64 = 2.0;
/// One turn at a time per chat, each message its own turn; no tool progress lines (they
/// would quote the command and so name the message); the tool runs without asking.
const SETTINGS: &str = "display:\n  busy_input_mode: queue\n  tool_progress: \"off\"\n\
                        approvals:\n  mode: \"off\"\n";
/// The commit of a reply's claim (`mark_attempting`, src/state/postgres/ledger_writes.rs).
const CLAIM_SQL: &str = "SET state = 'attempting', attempts = attempts + 1";
/// A lease renewal (`extend`, src/state/postgres/lease.rs).
const RENEWAL_SQL: &str = "UPDATE hermesd_leases SET expires_at = now() +";
/// A history row (a turn under way).
const HISTORY_SQL: &str = "INSERT INTO messages";

/// One run: the rig, what is up, and what happened when.
struct Run {
    plan: Plan,
    rig: ClusterRig,
    pool: PgPool,
    gate: AnswerGate,
    effects: tempfile::TempDir,
    up: Vec<bool>,
    started: Instant,
    events: Vec<String>,
}

impl Run {
    async fn start(plan: Plan) -> Run {
        println!("fault run: {}", plan.describe());
        let rig = ClusterRig::start_proxied_with_env(
            INSTANCES,
            LEASE_SECONDS,
            SETTINGS,
            plan.instance_env(),
        )
        .await;
        let pool = PgPool::connect(&rig.pg.url()).await.expect("connect");
        let effects = tempfile::tempdir().expect("temp dir");
        let gate = traffic::install_model(&rig, &effects.path().join("effects.log"));
        Run {
            plan,
            rig,
            pool,
            gate,
            effects,
            up: vec![true; INSTANCES],
            started: Instant::now(),
            events: Vec::new(),
        }
    }

    fn note(&mut self, what: String) {
        let line = format!("{:>6.1}s {what}", self.started.elapsed().as_secs_f64());
        println!("  {line}");
        self.events.push(line);
    }

    /// Panics with the seed, the schedule, what happened and each instance's log tail.
    fn fail(&self, problems: &[String]) -> ! {
        let mut report = format!(
            "fault run failed ({})\nwhat happened:\n  {}\nproblems:\n  {}\n",
            self.plan.describe(),
            self.events.join("\n  "),
            problems.join("\n  ")
        );
        for chat in self.plan.waves[0].iter().map(|m| m.chat) {
            let texts: Vec<String> = self
                .rig
                .sent_to_anyone()
                .into_iter()
                .filter(|s| s.chat_id == chat)
                .map(|s| s.text.chars().take(60).collect())
                .collect();
            report.push_str(&format!("chat {chat} got {texts:?}\n"));
        }
        for (name, lines) in self.rig.all_logs() {
            // Warnings, errors and lease changes: the start-up's lines say little here.
            let lines: Vec<String> = lines
                .into_iter()
                .filter(|l| !l.contains("\"level\":\"INFO\"") || l.contains("lease"))
                .filter(|l| !l.contains("the home is open") && !l.contains("privacy mode"))
                .collect();
            let tail = &lines[lines.len().saturating_sub(40)..];
            report.push_str(&format!(
                "--- {name} (last {} lines)\n{}\n",
                tail.len(),
                tail.join("\n")
            ));
        }
        panic!("{report}");
    }

    /// Waits (bounded) until `done`; a timeout fails the run naming `what`, with the ledger.
    async fn wait_for<F>(&self, what: &str, mut done: impl FnMut() -> F)
    where
        F: std::future::Future<Output = bool>,
    {
        let deadline = Instant::now() + WAIT;
        while !done().await {
            if Instant::now() > deadline {
                let mut problems = vec![format!("timed out waiting until {what}")];
                problems.extend(checks::ledger_rows(&self.pool).await);
                self.fail(&problems);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn post_wave(&mut self, w: usize) {
        let wave = self.plan.waves[w].clone();
        let to = traffic::post_wave(&self.rig, &wave, &self.up).await;
        self.note(format!("wave {w} accepted by instances {to:?}"));
    }

    /// Traps the next commit of `sql` on every instance up.
    fn arm_everywhere(&self, sql: &str) -> Vec<(usize, Trap)> {
        (0..INSTANCES)
            .filter(|n| self.up[*n])
            .map(|n| (n, self.rig.proxy(n).trap(sql)))
            .collect()
    }

    /// The first of `traps` to spring: its instance and the held answer.
    async fn first_sprung(traps: Vec<(usize, Trap)>) -> (usize, Caught) {
        let sprung = traps
            .into_iter()
            .map(|(n, trap)| Box::pin(async move { (n, trap.sprung(WAIT).await) }));
        let ((n, caught), _, _) = futures_util::future::select_all(sprung).await;
        (n, caught)
    }

    /// Whether instance `n`'s lease has run out (the database's clock) and it owes no reply
    /// any more: the others have taken its work over.
    async fn taken_over(&self, n: usize) -> bool {
        let name = &self.rig.instances[n].name;
        let expired: Option<bool> = sqlx::query_scalar(
            "SELECT expires_at <= now() FROM hermesd_leases WHERE scope = 'instance' AND key = $1",
        )
        .bind(name)
        .fetch_optional(&self.pool)
        .await
        .expect("read the instance lease");
        let owed: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM delivery_obligations \
             WHERE owner_instance = $1 AND state IN ('pending', 'attempting', 'failed')",
        )
        .bind(name)
        .fetch_one(&self.pool)
        .await
        .expect("count owed replies");
        expired.unwrap_or(true) && owed == 0
    }

    async fn wait_taken_over(&self, n: usize) {
        let what = format!("instance {n}'s lease ran out and its replies moved on");
        self.wait_for(&what, || self.taken_over(n)).await;
    }

    /// Waits until instance `n` has renewed a lease twice more: it has run again since a
    /// fault was lifted, so whatever it was about to do when the fault hit is done.
    async fn progressed(&self, n: usize) {
        for _ in 0..2 {
            let trap = self.rig.proxy(n).trap(RENEWAL_SQL);
            trap.sprung(WAIT).await.release();
        }
    }

    /// Begins fault `w` (wave `w` is posted with the model's answers held), posts wave
    /// `w + 1` while it lasts, and lifts it.
    async fn inject(&mut self, w: usize, fault: Fault) {
        match fault {
            Fault::PauseAfterClaim => {
                let claims = self.arm_everywhere(CLAIM_SQL);
                self.gate.open();
                let (n, caught) = Self::first_sprung(claims).await;
                self.stop(n, caught, "a reply's claim committed").await;
                self.post_during(w).await;
                self.wait_taken_over(n).await;
                self.resume(n).await;
            }
            Fault::PauseInRenewal { instance: n } => {
                let renewal = self.rig.proxy(n).trap(RENEWAL_SQL);
                self.gate.open();
                let caught = renewal.sprung(WAIT).await;
                self.stop(n, caught, "a lease renewal committed").await;
                self.post_during(w).await;
                self.wait_taken_over(n).await;
                self.resume(n).await;
            }
            Fault::SlowThenStalledDatabase { instance: n, .. } => {
                self.gate.open();
                self.rig.proxy(n).set_stalled(true);
                self.up[n] = false;
                self.note(format!("instance {n}'s database link stalled"));
                self.post_during(w).await;
                self.wait_taken_over(n).await;
                self.rig.proxy(n).set_stalled(false);
                self.rig.proxy(n).set_latency(Duration::ZERO);
                self.up[n] = true;
                self.note(format!("instance {n}'s database link back to normal"));
                self.progressed(n).await;
            }
            Fault::Kill9 {
                point,
                restart_at_once,
            } => {
                let n = match point {
                    KillPoint::AfterPosting(n) => {
                        self.gate.open();
                        n
                    }
                    KillPoint::AfterClaim | KillPoint::AtHistoryWrite => {
                        let sql = match point {
                            KillPoint::AfterClaim => CLAIM_SQL,
                            _ => HISTORY_SQL,
                        };
                        let traps = self.arm_everywhere(sql);
                        self.gate.open();
                        let (n, caught) = Self::first_sprung(traps).await;
                        self.rig.kill9(n);
                        drop(caught);
                        n
                    }
                };
                if self.rig.is_running(n) {
                    self.rig.kill9(n);
                }
                self.up[n] = false;
                self.note(format!("instance {n} killed (-9) at {point:?}"));
                if !restart_at_once {
                    self.post_during(w).await;
                    self.wait_taken_over(n).await;
                }
                self.rig.restart(n).await;
                self.up[n] = true;
                self.note(format!("instance {n} restarted"));
                if restart_at_once {
                    self.post_during(w).await;
                }
            }
            Fault::SkewedClock { .. } => unreachable!("applied at start"),
        }
    }

    /// SIGSTOP of instance `n` while `caught` holds its answer, then the answer let through
    /// (it waits in the socket until the process runs again).
    async fn stop(&mut self, n: usize, caught: Caught, at: &str) {
        self.rig.signal(n, "-STOP");
        caught.release();
        self.up[n] = false;
        self.note(format!("instance {n} stopped (SIGSTOP) once {at}"));
    }

    async fn resume(&mut self, n: usize) {
        self.rig.signal(n, "-CONT");
        self.up[n] = true;
        self.note(format!("instance {n} continued (SIGCONT)"));
        self.progressed(n).await;
    }

    async fn problems(&self) -> Vec<String> {
        let effects =
            std::fs::read_to_string(self.effects.path().join("effects.log")).unwrap_or_default();
        checks::violations(&self.rig, &self.pool, &self.plan, &effects).await
    }

    /// Readies the wave that begins `fault` (if any): the model's answers held so its turns
    /// are under way when the fault's trap is armed, and a slow link slow from now.
    fn prepare(&mut self, fault: Option<Fault>) {
        match fault {
            None => self.gate.open(),
            Some(fault) => {
                self.gate.close();
                if let Fault::SlowThenStalledDatabase {
                    instance,
                    latency_ms,
                } = fault
                {
                    let latency = Duration::from_millis(latency_ms);
                    self.rig.proxy(instance).set_latency(latency);
                    self.note(format!(
                        "instance {instance}: +{latency_ms} ms per round trip"
                    ));
                }
            }
        }
    }

    /// Posts wave `w + 1` while fault `w` lasts, readied for the fault after it.
    async fn post_during(&mut self, w: usize) {
        let next = self.plan.faults.get(w + 1).copied();
        self.prepare(next);
        self.post_wave(w + 1).await;
    }

    /// Runs the plan and checks it; panics with the report on any violation.
    async fn run(mut self) {
        let faults = self.plan.faults.clone();
        self.prepare(faults.first().copied());
        self.post_wave(0).await;
        for (w, fault) in faults.iter().enumerate() {
            self.inject(w, *fault).await;
        }
        self.gate.open();
        for w in faults.len() + 1..self.plan.waves.len() {
            self.post_wave(w).await;
        }
        let deadline = Instant::now() + WAIT;
        while !checks::all_answered(&self.rig, &self.pool, &self.plan).await {
            if Instant::now() > deadline {
                let mut problems = vec![
                    "timed out waiting until every message was answered and nothing owed"
                        .to_owned(),
                ];
                problems.extend(self.problems().await);
                problems.extend(checks::rows_for(&self.pool, &self.plan, &problems).await);
                problems.extend(checks::ledger_rows(&self.pool).await);
                self.fail(&problems);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        for n in 0..INSTANCES {
            self.progressed(n).await;
        }
        let mut problems = self.problems().await;
        if !problems.is_empty() {
            problems.extend(checks::rows_for(&self.pool, &self.plan, &problems).await);
            self.fail(&problems);
        }
        self.note("every message answered once, in order".to_owned());
        self.pool.close().await;
        self.rig.stop().await;
    }
}

async fn run(test: usize, kinds: &[FaultKind], shuffle: bool) {
    let plan = Plan::new(plan::seed(test), kinds, shuffle);
    Run::start(plan).await.run().await;
}

// `HERMES_FAULT_KINDS` narrows a run to some kinds, e.g.
// `HERMES_FAULT_KINDS=pause-after-claim,kill9 cargo test --test cluster_faults named`.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_then_stalled_database_link() {
    run(2, &[FaultKind::SlowThenStalledDatabase], false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_instances_clock_minutes_off() {
    run(3, &[FaultKind::SkewedClock], false).await;
}

/// Every kind of fault in one run, in a seeded order (or the kinds `HERMES_FAULT_KINDS`
/// names).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn named_faults_in_a_seeded_order() {
    let kinds: Vec<FaultKind> = match std::env::var("HERMES_FAULT_KINDS") {
        Ok(names) => names
            .split(',')
            .map(|name| FaultKind::from_name(name.trim()))
            .collect(),
        Err(_) => ALL_KINDS.to_vec(),
    };
    run(5, &kinds, true).await;
}

/// As [`named_faults_in_a_seeded_order`], with another seed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fault_in_another_seeded_order() {
    run(6, &ALL_KINDS, true).await;
}

const ALL_KINDS: [FaultKind; 5] = [
    FaultKind::SkewedClock,
    FaultKind::SlowThenStalledDatabase,
    FaultKind::PauseAfterClaim,
    FaultKind::PauseInRenewal,
    FaultKind::Kill9,
];
