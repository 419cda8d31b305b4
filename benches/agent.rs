//! Agent benchmark: our own time per turn with a fake model that answers instantly (every
//! message persisted), and memory per idle session and per active turn. Prints one JSON
//! report (also written to `target/bench-agent.json`). `-- --quick` is the CI size.
//!
//! `-- --tool-payload` prints only the size of the tool definitions the model receives with
//! the default toolsets (issue 18: shorter descriptions cost fewer tokens on every call).
//!
//! `-- --prompt` prints only the system-prompt build (issue 19): a home with SOUL.md and 50
//! skills, a project with a 20 KB AGENTS.md — time per build and the prompt's size. The full
//! run also times plain turns with the `skills` toolset off, the shape of a turn before
//! skills existed, next to the same turns with it on.
//!
//! "Own time" is the whole turn's wall time: the fake answers from memory in microseconds, so
//! nearly all of it is ours (HTTP round trips, parsing, tool dispatch, persistence). It is
//! therefore an upper bound on the agent's overhead.

#[path = "../tests/support/fake_model.rs"]
mod fake_model;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use fake_model::{FakeCall, FakeModel, Reply, Step};
use hermesd::agent::provider::{Endpoint, HttpSettings, ModelClient};
use hermesd::agent::{Agent, AgentDeps, UserPrompts, new_session_id};
use hermesd::home::HermesHome;
use hermesd::state::Store;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

fn summary(mut samples: Vec<f64>) -> Value {
    samples.sort_by(|a, b| a.total_cmp(b));
    let pick = |p: f64| samples[((samples.len() as f64 * p) as usize).min(samples.len() - 1)];
    json!({"p50_ms": (pick(0.5) * 1000.0).round() / 1000.0,
           "p99_ms": (pick(0.99) * 1000.0).round() / 1000.0, "n": samples.len()})
}

async fn deps(home: &HermesHome, fake: &FakeModel) -> Arc<AgentDeps> {
    let env: BTreeMap<String, String> =
        [("HOME".to_owned(), home.path().display().to_string())].into();
    let loaded = hermesd::config::load(home, &env).expect("config");
    let store = Store::open(&home.state_db()).expect("store");
    let endpoint = Endpoint::new("fake", fake.base_url(), None, "fake-model");
    let client =
        ModelClient::with_endpoints(endpoint, Vec::new(), HttpSettings::default()).expect("client");
    Arc::new(AgentDeps::with_client(
        home,
        &loaded,
        store,
        UserPrompts::default(),
        client,
    ))
}

/// Runs `turns` turns, pushing `script` before each, and returns each turn's wall time (ms).
async fn timed_turns(
    agent: &mut Agent,
    fake: &FakeModel,
    turns: usize,
    script: &dyn Fn() -> Vec<Step>,
) -> Vec<f64> {
    let (events, _rx) = hermesd::agent::event_channel();
    let mut own = Vec::with_capacity(turns);
    for i in 0..turns {
        fake.push_all(script());
        let started = Instant::now();
        agent
            .run_turn(&format!("message {i}"), &events, &CancellationToken::new())
            .await
            .expect("turn");
        own.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    own
}

fn todo_call(i: usize) -> FakeCall {
    FakeCall {
        id: format!("call_{i}"),
        name: "todo".into(),
        arguments:
            json!({"todos": [{"id": format!("{i}"), "content": "step", "status": "pending"}]})
                .to_string(),
    }
}

/// The `tools` array of the first model request that carried one, as the model receives it:
/// how many definitions and their JSON size in bytes.
fn tool_payload(fake: &FakeModel) -> Value {
    let tools = fake
        .requests()
        .into_iter()
        .find_map(|request| request.body.get("tools").cloned())
        .expect("a model request with tool definitions");
    let bytes = serde_json::to_string(&tools).unwrap().len();
    json!({"count": tools.as_array().map_or(0, Vec::len), "bytes": bytes})
}

/// A home with SOUL.md and 50 skills in 5 categories, and a project directory holding a
/// 20 KB AGENTS.md; returns the project directory.
fn persona_home(home: &HermesHome) -> std::path::PathBuf {
    let write = |path: std::path::PathBuf, text: &str| {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        home.path().join("SOUL.md"),
        "You are Ada, a calm and exact assistant who explains her reasoning briefly.",
    );
    for i in 0..50 {
        let name = format!("skill-{i:02}");
        let body = "Step one: read the request.\nStep two: do the work.\n".repeat(40);
        write(
            home.path()
                .join(format!("skills/category-{}/{name}/SKILL.md", i % 5)),
            &format!(
                "---\nname: {name}\ndescription: What skill number {i} is for, in one line\n---\n{body}"
            ),
        );
    }
    let project = home.path().join("project");
    let line = "- Run the tests before every commit and keep the change small.\n";
    let agents: String = line.repeat(20 * 1024 / line.len() + 1);
    write(project.join("AGENTS.md"), &agents[..20 * 1024]);
    project
}

/// Times `system_prompt` for the persona home: (per-build ms summary, prompt bytes).
async fn prompt_build(home: &HermesHome, fake: &FakeModel, builds: usize) -> Value {
    let project = persona_home(home);
    let deps = deps(home, fake).await;
    let mut deps = Arc::try_unwrap(deps).expect("sole owner");
    deps.settings.cwd = project;
    let mut samples = Vec::with_capacity(builds);
    let mut bytes = 0;
    for _ in 0..builds {
        let started = Instant::now();
        let prompt = deps.system_prompt("telegram");
        samples.push(started.elapsed().as_secs_f64() * 1000.0);
        bytes = prompt.len();
    }
    deps.store.close().await;
    json!({"skills": 50, "agents_md_bytes": 20 * 1024, "build": summary(samples), "prompt_bytes": bytes})
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let payload_only = std::env::args().any(|a| a == "--tool-payload");
    let prompt_only = std::env::args().any(|a| a == "--prompt");
    let (turns, idle_sessions) = if quick { (100, 200) } else { (1000, 2000) };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let report = runtime.block_on(async {
        let dir = tempfile::tempdir_in("/dev/shm")
            .or_else(|_| tempfile::tempdir())
            .unwrap();
        let home = HermesHome::at(dir.path());
        let fake = FakeModel::start_in_background();
        let prompt = prompt_build(
            &HermesHome::at(dir.path().join("persona")),
            &fake,
            if quick { 50 } else { 200 },
        )
        .await;
        if prompt_only {
            return json!({"prompt_build": prompt});
        }
        let deps = deps(&home, &fake).await;

        let mut agent = Agent::create(Arc::clone(&deps), new_session_id(), "bench", None)
            .await
            .unwrap();
        // Warm up connections and caches.
        timed_turns(&mut agent, &fake, 10, &|| vec![Step::text("ok")]).await;
        let tool_definitions = tool_payload(&fake);
        if payload_only {
            deps.store.close().await;
            return json!({"tool_definitions": tool_definitions});
        }
        let plain = timed_turns(&mut agent, &fake, turns, &|| vec![Step::text("ok")]).await;

        // The same turns without the skills toolset: what a turn cost before skills.
        let without_skills = {
            let mut bare = AgentDeps::with_client(
                &home,
                &hermesd::config::load(&home, &BTreeMap::new()).expect("config"),
                deps.store.clone(),
                UserPrompts::default(),
                deps.client.clone(),
            );
            bare.settings.disabled_toolsets = vec!["skills".to_owned()];
            let mut agent = Agent::create(Arc::new(bare), new_session_id(), "bench", None)
                .await
                .unwrap();
            timed_turns(&mut agent, &fake, 10, &|| vec![Step::text("ok")]).await;
            timed_turns(&mut agent, &fake, turns, &|| vec![Step::text("ok")]).await
        };

        let mut agent = Agent::create(Arc::clone(&deps), new_session_id(), "bench", None)
            .await
            .unwrap();
        let four_tools = timed_turns(&mut agent, &fake, turns / 4, &|| {
            vec![
                Step::Reply(Reply {
                    tool_calls: (0..4).map(todo_call).collect(),
                    ..Reply::default()
                }),
                Step::text("done"),
            ]
        })
        .await;

        // Idle sessions: first give each session a one-turn history (this also grows the
        // store's caches and the fake's request log), then measure only what holding the
        // resumed agents in memory costs, as the gateway's agent cache does.
        let (events, _rx) = hermesd::agent::event_channel();
        let mut ids = Vec::with_capacity(idle_sessions);
        for i in 0..idle_sessions {
            let mut agent = Agent::create(Arc::clone(&deps), new_session_id(), "bench", None)
                .await
                .unwrap();
            fake.push(Step::text(format!("reply {i}")));
            agent
                .run_turn("hello there", &events, &CancellationToken::new())
                .await
                .unwrap();
            ids.push(agent.session_id().to_owned());
        }
        let before = rss_kib();
        let mut idle = Vec::with_capacity(idle_sessions);
        for id in ids {
            idle.push(Agent::resume(Arc::clone(&deps), id).await.unwrap());
        }
        let after = rss_kib();
        let per_idle_kib = (after.saturating_sub(before)) as f64 / idle_sessions as f64;

        // Active turns: many turns in flight at once (the fake streams slowly so they
        // overlap); the peak RSS above the idle level, per turn.
        let active = if quick { 50 } else { 200 };
        for i in 0..active {
            fake.push(Step::Slow {
                reply: Reply::text(format!(
                    "a slow streamed reply number {i} with several words"
                )),
                delay: std::time::Duration::from_millis(20),
            });
        }
        let baseline = rss_kib();
        let peak = Arc::new(std::sync::atomic::AtomicU64::new(baseline));
        let sampling = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let sampler = tokio::spawn({
            let (peak, sampling) = (Arc::clone(&peak), Arc::clone(&sampling));
            async move {
                let mut tick = tokio::time::interval(std::time::Duration::from_millis(5));
                while sampling.load(std::sync::atomic::Ordering::Relaxed) {
                    tick.tick().await;
                    peak.fetch_max(rss_kib(), std::sync::atomic::Ordering::Relaxed);
                }
            }
        });
        let turns_in_flight = idle.iter_mut().take(active).map(|agent| {
            let events = events.clone();
            async move {
                agent
                    .run_turn("stream to me", &events, &CancellationToken::new())
                    .await
                    .map(|_| ())
            }
        });
        let results = futures_util::future::join_all(turns_in_flight).await;
        sampling.store(false, std::sync::atomic::Ordering::Relaxed);
        let _ = sampler.await;
        assert!(results.iter().all(Result::is_ok), "active turns failed");
        let peak = peak.load(std::sync::atomic::Ordering::Relaxed);
        let per_active_kib = peak.saturating_sub(baseline) as f64 / active as f64;
        deps.store.close().await;
        json!({
            "quick": quick,
            "tool_definitions": tool_definitions,
            "prompt_build": prompt,
            "own_time_plain_turn": summary(plain),
            "own_time_plain_turn_without_skills_toolset": summary(without_skills),
            "own_time_turn_with_4_parallel_tools": summary(four_tools),
            "idle_sessions": idle.len(),
            "rss_kib_before_idle_sessions": before,
            "rss_kib_after_idle_sessions": after,
            "kib_per_idle_session": (per_idle_kib * 10.0).round() / 10.0,
            "active_turns": active,
            "kib_per_active_turn": (per_active_kib * 10.0).round() / 10.0,
        })
    });
    let text = serde_json::to_string_pretty(&report).unwrap();
    println!("{text}");
    if !payload_only && !prompt_only {
        let target = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
        let _ = std::fs::write(target.join("bench-agent.json"), &text);
    }
}
