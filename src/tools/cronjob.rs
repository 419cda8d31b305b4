//! The `cronjob` tool: the agent schedules, lists and manages jobs in `cron/jobs.json` for
//! the person it is talking to. A job made in a chat delivers back to that chat by default
//! (its `origin`, read from the session's routing entry); a scheduled run cannot schedule
//! more jobs. A guest (someone admitted only because their group chat is allowed) sees and
//! manages only the jobs created from their own chat; allowed users and the operator manage
//! every job. Every answer is a JSON object; refusals say what to change.

use chrono::Utc;
use serde_json::{Value, json};

use super::context::{Caller, ToolCtx};
use super::error::ToolError;
use super::registry::{ToolEntry, check_fn, handler};
use crate::cron::ops::{JobEdit, Jobs, summary};
use crate::cron::{JobError, JobRecord, JobsStore, NewJob, StoreError, Zone};

const DESCRIPTION: &str = "Schedule work for later or on a repeat, and manage scheduled work. \
action=create needs `schedule` and `prompt`: the prompt runs later in a brand-new session that \
knows nothing of this chat, so write it so it stands alone. Its final answer is sent to this \
chat unless `deliver` says otherwise. Schedules: \"30m\" or \"2h\" (once, after that delay), \
\"every 30m\" (repeating), a five-field cron expression such as \"0 8 * * 1-5\", or a date and \
time such as \"2026-06-01T09:00\". action=list shows the jobs with their ids; update, pause, \
resume, remove and run (at once) take `job_id` (an id from list, or an exact name). A job \
that has nothing to report may answer exactly [SILENT] and nothing is sent.";

fn schema() -> Value {
    json!({
        "name": "cronjob",
        "description": DESCRIPTION,
        "parameters": {
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": ["create", "list", "update", "pause", "resume", "remove", "run"],
                    "description": "What to do."},
                "job_id": {"type": "string", "description": "The job to act on (id from list, or its exact name)."},
                "prompt": {"type": "string", "description": "The self-contained instruction a run follows."},
                "schedule": {"type": "string", "description": "When it runs (see above)."},
                "name": {"type": "string", "description": "A short label."},
                "repeat": {"type": "integer", "description": "How many runs before the job is removed; omit for no limit."},
                "deliver": {"type": "string", "description": "Where output goes: origin (this chat, the default), local (kept, not sent), a platform name (its home channel), or platform:chat_id[:thread_id]; comma-separate several."},
                "skills": {"type": "array", "items": {"type": "string"}, "description": "Skills to load before the prompt; an empty list clears them on update."},
                "model": {"type": "object", "properties": {"provider": {"type": "string"}, "model": {"type": "string"}},
                    "required": ["model"], "description": "Another model (and provider) for this job's runs."},
                "workdir": {"type": "string", "description": "Absolute directory the run's tools work in."}
            },
            "required": ["action"]
        }
    })
}

/// The tool's registry entry (shown only where the state store is available, since the
/// origin chat comes from it).
pub fn entry() -> ToolEntry {
    ToolEntry::new("cronjob", "cronjob", schema(), handler(call))
        .with_emoji("⏰")
        .with_check(check_fn(|ctx: &ToolCtx| ctx.store.is_some()))
}

fn text(args: &Value, key: &str) -> Option<String> {
    args.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// Why the tool did nothing; the Display text is the `error` the model reads.
#[derive(Debug, thiserror::Error)]
enum Refusal {
    #[error(transparent)]
    Job(#[from] JobError),
    #[error(
        "job {reference:?} was not created from this chat: a guest may only manage the \
         jobs made here; an allowed user of this bot can manage every job"
    )]
    NotCallersJob { reference: String },
    #[error("this action needs job_id (see action=list)")]
    MissingJobId,
    #[error("a scheduled run cannot schedule further jobs")]
    NestedCreate,
    #[error("unknown action {action:?}; use create, list, update, pause, resume, remove or run")]
    UnknownAction { action: String },
    /// The blocking task doing the file work panicked or was cancelled.
    #[error(transparent)]
    Worker(#[from] tokio::task::JoinError),
}

fn refuse(message: impl Into<String>) -> Result<String, ToolError> {
    Ok(json!({"success": false, "error": message.into()}).to_string())
}

fn job_json(job: &JobRecord) -> Value {
    json!({
        "job_id": job.id(), "name": job.name(), "schedule": job.schedule_display(),
        "next_run_at": job.get("next_run_at"), "last_run_at": job.get("last_run_at"),
        "last_status": job.get("last_status"), "state": job.state(), "enabled": job.enabled(),
        "deliver": job.deliver(), "skills": job.skills(), "summary": summary(job),
    })
}

/// The chat this session talks in, from its routing entry; `None` outside a chat.
async fn origin(ctx: &ToolCtx) -> Option<Value> {
    let store = ctx.store.as_ref()?;
    // The scope the gateway wrote the entry under (shared by every instance on PostgreSQL).
    let scope = crate::state::routing_scope(&ctx.home, store);
    let entries = store.load_routing(&scope).await.ok()?;
    let entry = entries
        .values()
        .find(|e| e.get("session_id").and_then(Value::as_str) == Some(ctx.session_id.as_str()))?;
    let origin = entry.get("origin")?;
    let mut kept = serde_json::Map::new();
    for key in ["platform", "chat_id", "chat_name", "thread_id"] {
        if let Some(v) = origin.get(key).filter(|v| !v.is_null()) {
            kept.insert(key.into(), v.clone());
        }
    }
    (kept.contains_key("platform") && kept.contains_key("chat_id")).then_some(Value::Object(kept))
}

/// The jobs the configuration calls for (with `state.backend: postgres`, the ones every
/// instance shares), read in its zone (else the host's). A configuration that cannot be
/// loaded leaves the home's file: the daemon refuses to start on one, so this is a
/// `hermesd chat` on a home whose configuration broke meanwhile.
fn configured_jobs(ctx: &ToolCtx) -> Result<Jobs, StoreError> {
    match crate::config::load(&ctx.home, &ctx.env) {
        Ok(loaded) => {
            let zone = Zone::parse(&loaded.config.cron.timezone).unwrap_or(Zone::Host);
            let store = crate::cron::shared::open_store(&ctx.home, &loaded.config)?;
            Ok(Jobs::new(store, zone))
        }
        Err(e) => {
            tracing::warn!(error = %e, "cronjob tool: the configuration cannot be loaded; using this home's jobs file");
            Ok(Jobs::new(JobsStore::new(ctx.home.cron_dir()), Zone::Host))
        }
    }
}

/// Whether `job` was created from the caller's chat (its stored origin names the caller's
/// platform and chat id).
fn created_in_callers_chat(job: &JobRecord, caller: &Caller) -> bool {
    job.origin().is_some_and(|origin| {
        origin.get("platform").and_then(Value::as_str) == Some(caller.platform.as_str())
            && match origin.get("chat_id") {
                Some(Value::String(id)) => *id == caller.chat_id,
                Some(Value::Number(id)) => id.to_string() == caller.chat_id,
                _ => false,
            }
    })
}

/// Whether the caller may see and manage `job`: allowed users and the operator may manage
/// every job, a guest only those created from their own chat.
fn may_manage(job: &JobRecord, caller: &Caller) -> bool {
    caller.authority.is_trusted() || created_in_callers_chat(job, caller)
}

/// The id of the job `reference` names, when the caller may manage it; otherwise the
/// refusal to give the model.
fn managed_job_id(jobs: &Jobs, reference: &str, caller: &Caller) -> Result<String, Refusal> {
    let all = jobs.list()?;
    let index = crate::cron::find_job(&all, reference)?.ok_or_else(|| JobError::NotFound {
        reference: reference.to_owned(),
    })?;
    let job = &all[index];
    if !may_manage(job, caller) {
        tracing::warn!(
            platform = %caller.platform,
            chat_id = %caller.chat_id,
            job_id = job.id(),
            "a guest's turn tried to manage a scheduled job created elsewhere; refused"
        );
        return Err(Refusal::NotCallersJob {
            reference: reference.to_owned(),
        });
    }
    Ok(job.id().to_owned())
}

async fn call(ctx: ToolCtx, args: Value) -> Result<String, ToolError> {
    let action = text(&args, "action").unwrap_or_default().to_lowercase();
    let opening = ctx.clone();
    let jobs = match tokio::task::spawn_blocking(move || configured_jobs(&opening)).await {
        Ok(Ok(jobs)) => jobs,
        Ok(Err(e)) => return refuse(format!("the scheduled jobs cannot be reached: {e}")),
        Err(_) => return refuse("the scheduled jobs cannot be reached right now"),
    };
    let now = Utc::now();
    let model = args.get("model");
    let model_name = model
        .and_then(|m| m.get("model"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let provider = model
        .and_then(|m| m.get("provider"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let skills: Option<Vec<String>> = args.get("skills").and_then(Value::as_array).map(|items| {
        items
            .iter()
            .filter_map(|s| s.as_str().map(str::to_owned))
            .collect()
    });
    let job_ref = text(&args, "job_id");
    let needs_job = || job_ref.clone().ok_or(Refusal::MissingJobId);
    let is_cron_run = ctx.session_id.starts_with("cron_");
    let outcome: Result<Value, Refusal> = match action.as_str() {
        "create" if is_cron_run => Err(Refusal::NestedCreate),
        "create" => {
            let (Some(schedule), Some(prompt)) = (text(&args, "schedule"), text(&args, "prompt"))
            else {
                return refuse("create needs both schedule and prompt");
            };
            let workdir = text(&args, "workdir");
            if let Some(Err(e)) = workdir
                .as_deref()
                .map(|dir| crate::cron::workdir::inside_roots(dir, &ctx.allowed_roots))
            {
                tracing::warn!(session_id = %ctx.session_id, "cron job refused: workdir outside the roots");
                return refuse(format!("the job was not created: {e}"));
            }
            let new = NewJob {
                prompt,
                schedule,
                name: text(&args, "name"),
                repeat: args.get("repeat").and_then(Value::as_i64),
                deliver: text(&args, "deliver"),
                origin: origin(&ctx).await,
                skills: skills.unwrap_or_default(),
                model: model_name,
                provider,
                workdir,
                workdir_by_operator: false,
            };
            tokio::task::spawn_blocking(move || jobs.create(new, now))
                .await
                .map_err(Refusal::from)
                .and_then(|r| r.map_err(Refusal::from))
                .map(|job| json!({"success": true, "job": job_json(&job)}))
        }
        "list" => {
            let caller = ctx.caller.clone();
            tokio::task::spawn_blocking(move || jobs.list())
                .await
                .map_err(Refusal::from)
                .and_then(|r| r.map_err(Refusal::from))
                .map(|all| {
                    let visible: Vec<Value> = all
                        .iter()
                        .filter(|job| may_manage(job, &caller))
                        .map(job_json)
                        .collect();
                    json!({"success": true, "jobs": visible})
                })
        }
        "update" | "pause" | "resume" | "remove" | "run" => {
            let reference = match needs_job() {
                Ok(reference) => reference,
                Err(e) => return refuse(e.to_string()),
            };
            let edit = JobEdit {
                schedule: text(&args, "schedule"),
                prompt: text(&args, "prompt"),
                name: text(&args, "name"),
                deliver: text(&args, "deliver"),
                repeat: args.get("repeat").and_then(Value::as_i64),
                skills,
                model: model_name,
                provider,
            };
            let action = action.clone();
            let caller = ctx.caller.clone();
            tokio::task::spawn_blocking(move || {
                let id = managed_job_id(&jobs, &reference, &caller)?;
                Ok(match action.as_str() {
                    "update" => jobs.edit(&id, edit, now),
                    "pause" => jobs.pause(&id, None, now),
                    "resume" => jobs.resume(&id, now),
                    "remove" => jobs.remove(&id, now),
                    _ => jobs.trigger(&id, now),
                }?)
            })
            .await
            .map_err(Refusal::from)
            .and_then(|r| r)
            .map(|job| json!({"success": true, "job": job_json(&job)}))
        }
        other => Err(Refusal::UnknownAction {
            action: other.to_owned(),
        }),
    };
    match outcome {
        Ok(value) => Ok(value.to_string()),
        Err(e) => refuse(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Value {
        serde_json::from_str(text).unwrap()
    }

    #[tokio::test]
    async fn create_list_pause_and_bad_input_through_the_tool() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ToolCtx::for_tests(dir.path());
        let made = parse(&call(ctx.clone(), json!({"action": "create", "schedule": "every 2h", "prompt": "check the feed", "skills": ["news"]})).await.unwrap());
        assert_eq!(made["success"], true, "{made}");
        let id = made["job"]["job_id"].as_str().unwrap().to_owned();
        assert_eq!(
            made["job"]["deliver"], "local",
            "no chat here, so nothing to deliver back to"
        );
        let listed = parse(&call(ctx.clone(), json!({"action": "list"})).await.unwrap());
        assert_eq!(listed["jobs"][0]["skills"], json!(["news"]));
        let paused = parse(
            &call(ctx.clone(), json!({"action": "pause", "job_id": id}))
                .await
                .unwrap(),
        );
        assert_eq!(paused["job"]["state"], "paused");
        let bad = parse(
            &call(
                ctx.clone(),
                json!({"action": "create", "schedule": "whenever", "prompt": "x"}),
            )
            .await
            .unwrap(),
        );
        assert_eq!(bad["success"], false);
        assert!(
            bad["error"].as_str().unwrap().contains("accepted forms"),
            "{bad}"
        );
        let bad = parse(
            &call(
                ctx.clone(),
                json!({"action": "create", "schedule": "1h", "prompt": "x", "deliver": "pager"}),
            )
            .await
            .unwrap(),
        );
        assert!(
            bad["error"].as_str().unwrap().contains("not a platform"),
            "{bad}"
        );
        let bad = parse(
            &call(ctx.clone(), json!({"action": "remove"}))
                .await
                .unwrap(),
        );
        assert!(bad["error"].as_str().unwrap().contains("job_id"), "{bad}");
        let mut in_run = ctx.clone();
        in_run.session_id = "cron_abc_20260101_000000".into();
        let bad = parse(
            &call(
                in_run,
                json!({"action": "create", "schedule": "1h", "prompt": "x"}),
            )
            .await
            .unwrap(),
        );
        assert!(
            bad["error"].as_str().unwrap().contains("cannot schedule"),
            "{bad}"
        );
        let removed = parse(
            &call(ctx, json!({"action": "remove", "job_id": id}))
                .await
                .unwrap(),
        );
        assert_eq!(removed["success"], true);
    }

    fn guest_in(chat_id: &str) -> Caller {
        Caller {
            authority: crate::tools::context::Authority::Guest,
            platform: "telegram".into(),
            chat_id: chat_id.into(),
            user_id: Some("333".into()),
            thread_id: None,
        }
    }

    fn job_made_in(ctx: &ToolCtx, chat_id: &str, name: &str) -> String {
        let jobs = Jobs::new(JobsStore::new(ctx.home.cron_dir()), Zone::Host);
        let new = NewJob {
            prompt: "report".into(),
            schedule: "every 2h".into(),
            name: Some(name.into()),
            repeat: None,
            deliver: None,
            origin: Some(json!({"platform": "telegram", "chat_id": chat_id})),
            skills: Vec::new(),
            model: None,
            provider: None,
            workdir: None,
            workdir_by_operator: false,
        };
        jobs.create(new, Utc::now()).unwrap().id().to_owned()
    }

    #[tokio::test]
    async fn a_guest_manages_only_the_jobs_of_their_own_chat() {
        let dir = tempfile::tempdir().unwrap();
        let operator = ToolCtx::for_tests(dir.path());
        let owners = job_made_in(&operator, "111", "owner-digest");
        let groups = job_made_in(&operator, "-1001", "group-digest");
        let mut guest = operator.clone();
        guest.caller = guest_in("-1001");

        let listed = parse(
            &call(guest.clone(), json!({"action": "list"}))
                .await
                .unwrap(),
        );
        let ids: Vec<&str> = listed["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["job_id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, [groups.as_str()], "the owner's job is not even listed");
        for action in ["update", "pause", "resume", "remove", "run"] {
            for reference in [owners.as_str(), "owner-digest"] {
                let refused = parse(
                    &call(
                        guest.clone(),
                        json!({"action": action, "job_id": reference, "prompt": "x"}),
                    )
                    .await
                    .unwrap(),
                );
                assert_eq!(refused["success"], false, "{action}: {refused}");
                let error = refused["error"].as_str().unwrap();
                assert!(
                    error.contains("not created from this chat") && error.contains("allowed user"),
                    "{error}"
                );
            }
        }
        let paused = parse(
            &call(guest, json!({"action": "pause", "job_id": groups}))
                .await
                .unwrap(),
        );
        assert_eq!(paused["success"], true, "{paused}");

        // The operator (and any allowed user) still manages every job.
        let all = parse(
            &call(operator.clone(), json!({"action": "list"}))
                .await
                .unwrap(),
        );
        assert_eq!(all["jobs"].as_array().unwrap().len(), 2);
        let mut allowed = operator.clone();
        allowed.caller = guest_in("-1001");
        allowed.caller.authority = crate::tools::context::Authority::AllowedUser;
        let removed = parse(
            &call(allowed, json!({"action": "remove", "job_id": owners}))
                .await
                .unwrap(),
        );
        assert_eq!(removed["success"], true, "{removed}");
    }
}
