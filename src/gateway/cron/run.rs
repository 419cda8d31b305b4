//! One scheduled run: a fresh agent session (source `cron`) with the job's model, provider,
//! working directory and skills note, bounded by `cron.run_timeout`; then its record under
//! `cron/output/`, its delivery (nothing for an empty or `[SILENT]` reply) recorded with the
//! end of its claim and sent through the chat lanes, and its outcome written to `jobs.json`.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::{Outcome, OutcomeQueue, RunResult, prepare, zone};
use crate::agent::Agent;
use crate::config::Config;
use crate::cron::JobsStore;
use crate::cron::output::{self, RunRecord, is_silent};
use crate::cron::target::{self, Target};
use crate::cron::{JobRecord, skills};
use crate::gateway::router::Router;
use crate::home::HermesHome;
use crate::state::{CronRunEnd, NewObligation};

/// A run this process claimed.
#[derive(Debug, Clone)]
pub(super) struct Claimed {
    pub job: JobRecord,
    pub scheduled_at: i64,
    pub session_id: String,
}

/// A platform's configured home channel: `(chat_id, thread_id)`.
pub(crate) fn home_channel(config: &Config, platform: &str) -> Option<(String, Option<String>)> {
    let platform = match platform {
        "telegram" => &config.platforms.telegram,
        "discord" => &config.platforms.discord,
        "slack" => &config.platforms.slack,
        "whatsapp_cloud" => &config.platforms.whatsapp_cloud,
        "signal" => &config.platforms.signal,
        _ => return None,
    };
    let home = platform.home_channel.as_ref()?;
    Some((home.chat_id.clone(), home.thread_id.clone()))
}

fn shorten(text: &str, limit: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= limit {
        return flat;
    }
    let cut: String = flat.chars().take(limit.saturating_sub(3)).collect();
    format!("{}...", cut.trim_end())
}

/// Executes claimed runs and concludes them (also the runs recovery closes): at most
/// `cron.max_parallel_jobs` at once, each job at most once at a time in this process.
#[derive(Debug)]
pub(super) struct JobRunner {
    pub router: Arc<Router>,
    pub home: HermesHome,
    /// Where run records are kept (`cron/output/`).
    pub jobs: JobsStore,
    /// Ids of jobs running in this process.
    pub running: Mutex<HashSet<String>>,
    pub permits: Arc<Semaphore>,
    /// Interrupts running jobs (after the drain at shutdown).
    pub interrupt: CancellationToken,
    /// Where an ended run's outcome goes for the next tick to write.
    pub outcomes: Arc<OutcomeQueue>,
}

impl JobRunner {
    /// Ids of the jobs running now (the tick does not start them again).
    pub fn running_ids(&self) -> HashSet<String> {
        self.running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn set_running(&self, job_id: &str, running: bool) {
        let mut set = self.running.lock().unwrap_or_else(|e| e.into_inner());
        if running {
            set.insert(job_id.to_owned());
        } else {
            set.remove(job_id);
        }
    }

    pub async fn run_claimed(self: Arc<Self>, run: Claimed) {
        let permit = match self.permits.clone().try_acquire_owned() {
            Ok(permit) => Some(permit),
            Err(_) => {
                tracing::info!(
                    job_id = run.job.id(),
                    "scheduled run waiting for a free place (cron.max_parallel_jobs)"
                );
                tokio::select! {
                    permit = self.permits.clone().acquire_owned() => permit.ok(),
                    _ = self.interrupt.cancelled() => None,
                }
            }
        };
        // Set by the run when some of the job's skills were not found.
        let mut skills_note = None;
        let result = match permit {
            Some(_) => self.execute(&run, &mut skills_note).await,
            None => RunResult::Interrupted("the gateway stopped before the run started".into()),
        };
        self.conclude(&run.job, run.scheduled_at, result, skills_note.as_deref())
            .await;
        self.set_running(run.job.id(), false);
    }

    async fn execute(&self, run: &Claimed, skills_note: &mut Option<String>) -> RunResult {
        let job = &run.job;
        let (env, limit) = {
            let live = self.router.live();
            (live.env.clone(), live.config.cron.script_timeout_seconds)
        };
        let script_part = match prepare::before_agent(&self.home, &env, limit, job).await {
            Ok(part) => part,
            Err(done) => return done,
        };
        let Some(deps) = self.router.agent_deps() else {
            return RunResult::Failed("no model provider is configured".into());
        };
        let base_url = job
            .get("base_url")
            .and_then(|v| v.as_str())
            .filter(|u| !u.trim().is_empty());
        let workdir = job
            .get("workdir")
            .and_then(|w| w.as_str())
            .filter(|w| !w.is_empty());
        if let Some(dir) = workdir
            && !crate::cron::workdir::set_by_operator(job)
        {
            let roots = [deps.settings.cwd.clone(), deps.home.path().to_path_buf()];
            if let Err(e) = crate::cron::workdir::inside_roots(dir, &roots) {
                tracing::warn!(job_id = job.id(), error = %e, "scheduled run refused: its workdir");
                return RunResult::Failed(format!("not run: {e}"));
            }
        }
        let toolsets: Option<Vec<String>> = job
            .get("enabled_toolsets")
            .and_then(|v| v.as_array())
            .map(|items| {
                items
                    .iter()
                    .filter_map(|t| t.as_str().map(str::to_owned))
                    .collect()
            })
            .filter(|list: &Vec<String>| !list.is_empty());
        let deps = if job.model().is_some()
            || job.provider().is_some()
            || base_url.is_some()
            || workdir.is_some()
            || toolsets.is_some()
        {
            let Some(client) = deps.client.overridden(job.provider(), job.model()) else {
                return RunResult::Failed(format!(
                    "the job asks for provider {:?}, which is not configured",
                    job.provider().unwrap_or("")
                ));
            };
            let client = match base_url {
                Some(url) => match prepare::with_base_url(client, job.provider(), url) {
                    Ok(client) => client,
                    Err(e) => return RunResult::Failed(e.to_string()),
                },
                None => client,
            };
            let mut copy = deps.with_model_client(client);
            if let Some(dir) = workdir {
                copy.settings.cwd = dir.into();
            }
            if toolsets.is_some() {
                copy.settings.enabled_toolsets = toolsets;
            }
            Arc::new(copy)
        } else {
            deps
        };
        let prompt = match script_part {
            Some(part) => format!("{part}\n\n{}", job.prompt()),
            None => job.prompt().to_owned(),
        };
        let (prompt, note) = skills::prepare_prompt(
            skills::SkillSources {
                home: &deps.home,
                settings: &deps.settings.skills,
                env: &deps.env,
            },
            &prompt,
            &job.skills(),
        );
        *skills_note = note;
        let prompt = self.with_context_from(job, prompt);
        let mut agent = match Agent::create(deps, run.session_id.clone(), "cron", None).await {
            Ok(agent) => agent,
            Err(e) => return RunResult::Failed(e.to_string()),
        };
        let (events, stream) = crate::agent::event_channel();
        drop(stream); // nobody watches a scheduled run live
        let cancel = self.interrupt.child_token();
        let limit = self.router.live().config.cron.run_timeout_secs;
        let turn = tokio::time::timeout(
            Duration::from_secs(limit),
            agent.run_turn(&prompt, &events, &cancel),
        )
        .await;
        let result = match turn {
            Err(_) => RunResult::Failed(format!(
                "the run took longer than cron.run_timeout ({limit} s) and was stopped"
            )),
            Ok(Ok(outcome)) if outcome.interrupted => {
                RunResult::Interrupted("the gateway stopped during the run".into())
            }
            Ok(Ok(outcome)) => RunResult::Reply(outcome.reply),
            Ok(Err(e)) => RunResult::Failed(e.to_string()),
        };
        let _ = self
            .router
            .store()
            .end_session(&run.session_id, "cron_complete")
            .await;
        result
    }

    /// Records how a claimed run ended: output file, delivery obligations with the end of
    /// the claim (one transaction), the sends, then `jobs.json`.
    pub(super) async fn conclude(
        &self,
        job: &JobRecord,
        scheduled_at: i64,
        result: RunResult,
        skills_note: Option<&str>,
    ) {
        let live = self.router.live();
        let config = &live.config;
        let name = job.name();
        let (state, status, error, text) = match &result {
            RunResult::Reply(reply) if reply.trim().is_empty() => (
                "finished",
                "error",
                Some("the agent finished without a reply".to_owned()),
                None,
            ),
            RunResult::Reply(reply) if is_silent(reply) => ("finished", "ok", None, None),
            RunResult::Reply(reply) => {
                let body = match skills_note {
                    Some(note) => format!("{note}\n\n{reply}"),
                    None => reply.clone(),
                };
                let text = if config.cron.wrap_response {
                    format!(
                        "⏰ {name} (scheduled job {})\n\n{body}\n\n— Ask me, or use /cron, to change or stop this job.",
                        job.id()
                    )
                } else {
                    body
                };
                ("finished", "ok", None, Some(text))
            }
            RunResult::Failed(e) => (
                "finished",
                "error",
                Some(e.clone()),
                Some(format!(
                    "⚠️ Scheduled job '{name}' failed: {}",
                    shorten(e, 180)
                )),
            ),
            RunResult::Alert(alert) => (
                "finished",
                "error",
                Some(alert.clone()),
                Some(alert.clone()),
            ),
            RunResult::Interrupted(reason) => (
                "interrupted",
                "error",
                Some(format!("interrupted: {reason}")),
                Some(format!(
                    "⚠️ Scheduled job '{name}' was interrupted ({reason}) and did not finish. It is not run again for this time; its next scheduled run is unaffected."
                )),
            ),
        };
        self.save_record(job, &result, skills_note, config.cron.output_retention);
        let running = self.router.platform_names();
        let running: Vec<&str> = running.iter().map(String::as_str).collect();
        let targets = target::resolve(&job.deliver(), job.origin(), &running, &|p| {
            home_channel(config, p)
        });
        let (targets, missing): (Vec<Target>, Vec<Target>) = targets
            .into_iter()
            .partition(|t| running.contains(&t.platform.as_str()));
        let delivery_error = (!missing.is_empty()).then(|| {
            let names: Vec<String> = missing
                .iter()
                .map(|t| format!("{}:{}", t.platform, t.chat_id))
                .collect();
            format!(
                "not delivered to {} (platform not running in this gateway)",
                names.join(", ")
            )
        });
        if let Some(e) = &delivery_error {
            tracing::warn!(job_id = job.id(), error = %e, "scheduled job output not delivered everywhere");
        }
        let replies: Vec<NewObligation> = match &text {
            Some(text) => targets
                .iter()
                .map(|t| NewObligation {
                    session_key: format!("cron:{}", job.id()),
                    message_ref: format!(
                        "{scheduled_at}:{}:{}:{}",
                        t.platform,
                        t.chat_id,
                        t.thread_id.as_deref().unwrap_or("")
                    ),
                    platform: t.platform.clone(),
                    chat_id: t.chat_id.clone(),
                    thread_id: t.thread_id.clone(),
                    content: text.clone(),
                })
                .collect(),
            None => Vec::new(),
        };
        let end = CronRunEnd {
            job_id: job.id().to_owned(),
            scheduled_at,
            state,
            status: status.to_owned(),
            error: error.clone(),
            replies,
        };
        match self.router.store().finish_cron_run(end).await {
            Ok(Some(ids)) => {
                for (target, id) in targets.iter().zip(ids) {
                    self.router
                        .send_recorded(&target.platform, &target.chat_id, vec![id]);
                }
            }
            Ok(None) => {
                tracing::warn!(
                    job_id = job.id(),
                    scheduled_at,
                    "scheduled run was already closed; its output is kept in cron/output only"
                );
                return;
            }
            Err(e) => {
                // The claim stays `running`: the next start closes it with a notice.
                tracing::error!(job_id = job.id(), error = %e, "cannot record the end of a scheduled run");
                return;
            }
        }
        tracing::info!(job_id = job.id(), job = %name, status, scheduled_at, "scheduled run finished");
        self.outcomes.push(Outcome {
            job_id: job.id().to_owned(),
            scheduled_at,
            status: status.to_owned(),
            error,
            delivery_error,
        });
    }

    /// The reference's job chaining: the latest run record of each job in `context_from`
    /// goes before the prompt.
    fn with_context_from(&self, job: &JobRecord, prompt: String) -> String {
        let ids: Vec<String> = match job.get("context_from") {
            Some(serde_json::Value::String(id)) => vec![id.clone()],
            Some(serde_json::Value::Array(items)) => items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect(),
            _ => Vec::new(),
        };
        let mut parts = Vec::new();
        for id in ids {
            let latest = output::job_output_dir(&self.jobs.output_dir(), &id)
                .and_then(|dir| std::fs::read_dir(dir).ok())
                .and_then(|entries| {
                    entries
                        .filter_map(Result::ok)
                        .map(|e| e.path())
                        .filter(|p| p.extension().is_some_and(|e| e == "md"))
                        .max()
                })
                .and_then(|path| std::fs::read_to_string(path).ok());
            if let Some(text) = latest {
                parts.push(format!("Latest output of scheduled job {id}:\n\n{text}"));
            }
        }
        if parts.is_empty() {
            return prompt;
        }
        format!("{}\n\n---\n\n{prompt}", parts.join("\n\n---\n\n"))
    }

    fn save_record(&self, job: &JobRecord, result: &RunResult, note: Option<&str>, keep: u64) {
        let (reply, failure) = match result {
            RunResult::Reply(reply) => (Some(reply.clone()), None),
            RunResult::Failed(e) | RunResult::Alert(e) | RunResult::Interrupted(e) => {
                (None, Some(e.clone()))
            }
        };
        let reply = reply.map(|r| match note {
            Some(note) => format!("{note}\n\n{r}"),
            None => r,
        });
        let record = RunRecord {
            job_id: job.id(),
            job_name: &job.name(),
            schedule: &job.schedule_display(),
            prompt: job.prompt(),
            ran_at: zone(&self.router).at(Utc::now()),
            result: match (&reply, &failure) {
                (Some(reply), _) => Ok(reply.as_str()),
                (None, failure) => Err(failure.as_deref().unwrap_or("")),
            },
        };
        if let Err(e) = output::save(&self.jobs.output_dir(), &record, keep as i64) {
            tracing::warn!(job_id = job.id(), error = %e, "cannot write the run record");
        }
    }
}
