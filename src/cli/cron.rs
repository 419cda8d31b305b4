//! `hermesd cron list | add | edit | pause | resume | remove | run | status | import |
//! export`: the owner's shell view of `cron/jobs.json`, safe to use while the daemon (or
//! Python's `hermes`) runs on the same home — every change is one locked write, and the
//! daemon sees it at its next tick. With `state.backend: postgres` the jobs are the copy every
//! instance shares in the database; `import` and `export` move Hermes's `jobs.json` in and
//! out of it. Bad input is one `error:` line, exit 1; `--json` prints machine-readable output.

use std::collections::BTreeMap;

use chrono::Utc;
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use super::EXIT_FAILURE;
use crate::config::Config;
use crate::cron::ops::{JobEdit, Jobs, summary};
use crate::cron::{JobError, JobRecord, NewJob, Zone};
use crate::home::HermesHome;

#[derive(Debug, Subcommand)]
pub enum CronCommand {
    /// List scheduled jobs.
    List {
        /// Print JSON instead of lines.
        #[arg(long)]
        json: bool,
    },
    /// Add a job: SCHEDULE ("30m", "every 2h", "0 9 * * *", "2026-02-03T14:00") and PROMPT.
    Add(AddArgs),
    /// Change a job's schedule, prompt, name, target, repeat count, skills or model.
    Edit(EditArgs),
    /// Pause a job (it keeps its schedule).
    Pause {
        job: String,
        #[arg(long)]
        json: bool,
    },
    /// Resume a paused job from now.
    Resume {
        job: String,
        #[arg(long)]
        json: bool,
    },
    /// Remove a job and its run records.
    Remove {
        job: String,
        #[arg(long)]
        json: bool,
    },
    /// Run a job now, whatever its schedule (a running daemon starts it within a second).
    Run {
        job: String,
        #[arg(long)]
        json: bool,
    },
    /// Is the jobs file readable, how many jobs, what runs next, is a gateway running.
    Status {
        #[arg(long)]
        json: bool,
    },
    /// Replace the jobs with a Hermes jobs.json, byte for byte (with state.backend:
    /// postgres, the jobs every instance shares). Default: this home's cron/jobs.json.
    Import {
        /// The jobs.json to read.
        path: Option<std::path::PathBuf>,
    },
    /// Write the jobs, byte for byte, as a Hermes jobs.json (taking Hermes's lock when the
    /// file is named jobs.json). Default: this home's cron/jobs.json.
    Export {
        /// The jobs.json to write (replaced if it exists).
        path: Option<std::path::PathBuf>,
    },
}

/// What `add` and `edit` both set.
#[derive(Debug, Args)]
pub struct JobFlags {
    #[arg(long)]
    pub name: Option<String>,
    /// local, origin, all, a platform (its home channel) or platform:chat_id[:thread_id].
    #[arg(long)]
    pub deliver: Option<String>,
    /// Runs before the job is removed (default: forever; one-shots run once).
    #[arg(long)]
    pub repeat: Option<i64>,
    /// A skill to load for the run (repeat the flag for several; on edit, replaces them).
    #[arg(long = "skill")]
    pub skills: Vec<String>,
    #[arg(long)]
    pub model: Option<String>,
    #[arg(long)]
    pub provider: Option<String>,
    /// Print the job as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct AddArgs {
    pub schedule: String,
    pub prompt: String,
    /// Absolute, existing directory the job's tools work in. The operator may name any
    /// directory here (the job records that the operator chose it); a workdir the agent sets
    /// must lie inside its allowed roots.
    #[arg(long)]
    pub workdir: Option<String>,
    #[command(flatten)]
    pub flags: JobFlags,
}

#[derive(Debug, Args)]
pub struct EditArgs {
    pub job: String,
    #[arg(long)]
    pub schedule: Option<String>,
    #[arg(long)]
    pub prompt: Option<String>,
    #[command(flatten)]
    pub flags: JobFlags,
}

/// Why the zone schedules are read in could not be settled.
#[derive(Debug, thiserror::Error)]
enum ZoneError {
    #[error("invalid configuration:\n{0}")]
    Config(#[source] crate::config::ConfigErrors),
    #[error("timezone: {0}")]
    Timezone(#[source] crate::cron::schedule::UnknownZone),
}

/// The configuration and its zone, or an error naming the key.
fn configured(
    home: &HermesHome,
    env: &BTreeMap<String, String>,
) -> Result<(Config, Zone), ZoneError> {
    let loaded = crate::config::load(home, env).map_err(ZoneError::Config)?;
    let zone = Zone::parse(&loaded.config.cron.timezone).map_err(ZoneError::Timezone)?;
    Ok((loaded.config, zone))
}

fn print_job(job: &JobRecord, json: bool, verb: &str) {
    if json {
        println!("{}", job.to_value());
    } else {
        println!("{verb} {}", summary(job));
    }
}

pub fn run(home: &HermesHome, env: &BTreeMap<String, String>, command: CronCommand) -> i32 {
    let (config, zone) = match configured(home, env) {
        Ok(settled) => settled,
        Err(e) => {
            eprintln!("error: {e}");
            return crate::config::EXIT_CONFIG;
        }
    };
    // With `state.backend: postgres`, the jobs every instance shares.
    let store = match crate::cron::shared::open_store(home, &config) {
        Ok(store) => store,
        Err(e) => {
            eprintln!("error: cannot open the scheduled jobs: {e}");
            return EXIT_FAILURE;
        }
    };
    let jobs = Jobs::new(store, zone);
    let now = Utc::now();
    let result = match command {
        CronCommand::List { json } => list(&jobs, json),
        CronCommand::Add(args) => {
            let json = args.flags.json;
            let flags = args.flags;
            // The operator may name any directory, but it must exist (see cron::workdir).
            if let Some(Err(e)) = args
                .workdir
                .as_deref()
                .map(crate::cron::workdir::existing_dir)
            {
                eprintln!("error: {e}");
                return EXIT_FAILURE;
            }
            jobs.create(
                NewJob {
                    prompt: args.prompt,
                    schedule: args.schedule,
                    name: flags.name,
                    repeat: flags.repeat,
                    deliver: flags.deliver,
                    origin: None,
                    skills: flags.skills,
                    model: flags.model,
                    provider: flags.provider,
                    workdir: args.workdir,
                    workdir_by_operator: true,
                },
                now,
            )
            .map(|job| print_job(&job, json, "added"))
        }
        CronCommand::Edit(args) => {
            let json = args.flags.json;
            let flags = args.flags;
            let edit = JobEdit {
                schedule: args.schedule,
                prompt: args.prompt,
                name: flags.name,
                deliver: flags.deliver,
                repeat: flags.repeat,
                skills: (!flags.skills.is_empty()).then_some(flags.skills),
                model: flags.model,
                provider: flags.provider,
            };
            jobs.edit(&args.job, edit, now)
                .map(|job| print_job(&job, json, "edited"))
        }
        CronCommand::Pause { job, json } => jobs
            .pause(&job, None, now)
            .map(|j| print_job(&j, json, "paused")),
        CronCommand::Resume { job, json } => jobs
            .resume(&job, now)
            .map(|j| print_job(&j, json, "resumed")),
        CronCommand::Remove { job, json } => jobs
            .remove(&job, now)
            .map(|j| print_job(&j, json, "removed")),
        CronCommand::Run { job, json } => jobs.trigger(&job, now).map(|j| {
            print_job(
                &j,
                json,
                "due now (a running daemon starts it within a second):",
            )
        }),
        CronCommand::Status { json } => {
            status(home, &jobs, json);
            Ok(())
        }
        CronCommand::Import { path } => {
            let path = path.unwrap_or_else(|| jobs.store.jobs_path());
            return finish(jobs.store.import_from(&path).map(|count| {
                println!(
                    "imported {count} job(s) from {} into {}",
                    path.display(),
                    jobs.store.describe()
                )
            }));
        }
        CronCommand::Export { path } => {
            let path = path.unwrap_or_else(|| jobs.store.jobs_path());
            return finish(jobs.store.export_to(&path).map(|count| {
                println!(
                    "exported {count} job(s) from {} to {}",
                    jobs.store.describe(),
                    path.display()
                )
            }));
        }
    };
    finish(result)
}

/// Exit 0, or the error as one `error:` line and exit 1.
fn finish(result: Result<(), impl std::fmt::Display>) -> i32 {
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {e}");
            EXIT_FAILURE
        }
    }
}

fn list(jobs: &Jobs, json: bool) -> Result<(), JobError> {
    let all = jobs.list()?;
    if json {
        let values: Vec<Value> = all.iter().map(JobRecord::to_value).collect();
        println!("{}", Value::Array(values));
    } else if all.is_empty() {
        println!("no scheduled jobs");
    } else {
        for job in &all {
            println!("{}", summary(job));
        }
    }
    Ok(())
}

fn status(home: &HermesHome, jobs: &Jobs, json: bool) {
    let pid_file = home.path().join(crate::gateway::instance_lock::PID_FILE);
    let gateway = crate::gateway::lock_record::read_json::<
        crate::gateway::lock_record::ProcessRecord,
    >(&pid_file)
    .filter(|r| r.is_live_gateway())
    .map(|r| r.pid);
    let (readable, count, active, next) = match jobs.list() {
        Ok(all) => {
            let active: Vec<&JobRecord> = all.iter().filter(|j| j.enabled()).collect();
            let next = active
                .iter()
                .filter_map(|j| j.next_run_at().map(|t| (t, j.id().to_owned())))
                .min_by_key(|(t, _)| *t);
            (Ok(()), all.len(), active.len(), next)
        }
        Err(e) => (Err(e), 0, 0, None),
    };
    if json {
        println!(
            "{}",
            json!({
                "jobs_file": jobs.store.describe(),
                "shared": jobs.store.is_shared(),
                "readable": readable.is_ok(),
                "error": readable.as_ref().err().map(ToString::to_string),
                "jobs": count,
                "active": active,
                "next_run_at": next.as_ref().map(|(t, _)| crate::cron::schedule::format_timestamp(*t)),
                "next_job_id": next.as_ref().map(|(_, id)| id),
                "gateway_pid": gateway,
            })
        );
        return;
    }
    match &readable {
        Ok(()) => println!(
            "jobs file: {} ({count} jobs, {active} active)",
            jobs.store.describe()
        ),
        Err(e) => println!("jobs file: NOT READABLE — {e}"),
    }
    match next {
        Some((t, id)) => println!(
            "next run: {} (job {id})",
            crate::cron::schedule::format_timestamp(t)
        ),
        None => println!("next run: none"),
    }
    match gateway {
        Some(pid) => println!("gateway: running (pid {pid}); it runs due jobs"),
        None => println!("gateway: not running; jobs run only while `hermesd run` does"),
    }
}
