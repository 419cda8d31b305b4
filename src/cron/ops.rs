//! The operations every front end offers (the `cronjob` tool, `/cron`, `hermesd cron`):
//! create, list, edit, pause, resume, remove and run-now, each one locked read-change-write
//! of `jobs.json`. Errors are sentences for the person who asked.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::job::{self, JobRecord, NewJob, normalize_skills};
use super::schedule::{Zone, format_timestamp, parse_schedule};
use super::store::JobsStore;
use super::{JobError, find_job, target};

/// Changes to an existing job; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct JobEdit {
    pub schedule: Option<String>,
    pub prompt: Option<String>,
    pub name: Option<String>,
    pub deliver: Option<String>,
    pub repeat: Option<i64>,
    pub skills: Option<Vec<String>>,
    pub model: Option<String>,
    pub provider: Option<String>,
}

/// The jobs of one home, read in one zone.
#[derive(Debug, Clone)]
pub struct Jobs {
    pub store: JobsStore,
    pub zone: Zone,
}

impl Jobs {
    pub fn new(store: JobsStore, zone: Zone) -> Self {
        Self { store, zone }
    }

    fn stamp(&self, now: DateTime<Utc>) -> String {
        format_timestamp(self.zone.at(now))
    }

    /// Every job, in file order.
    pub fn list(&self) -> Result<Vec<JobRecord>, JobError> {
        Ok(self.store.load()?.jobs)
    }

    /// Validates and appends a new job; returns it.
    pub fn create(&self, new: NewJob, now: DateTime<Utc>) -> Result<JobRecord, JobError> {
        if new.prompt.trim().is_empty() && new.skills.is_empty() {
            return Err(JobError::NothingToRun);
        }
        if let Some(deliver) = &new.deliver {
            target::validate(deliver, new.origin.is_some())?;
        }
        let record = job::create(new, now, self.zone)?;
        let added = record.clone();
        self.store
            .update(&self.stamp(now), move |file| file.jobs.push(added))?;
        Ok(record)
    }

    /// Applies `change` to the job `reference` names (id or unique name); returns it after.
    fn change(
        &self,
        reference: &str,
        now: DateTime<Utc>,
        change: impl FnOnce(&mut JobRecord) -> Result<(), JobError>,
    ) -> Result<JobRecord, JobError> {
        self.store
            .update(&self.stamp(now), |file| -> Result<JobRecord, JobError> {
                let index = find_job(&file.jobs, reference)?.ok_or_else(|| not_found(reference))?;
                let mut edited = file.jobs[index].clone();
                change(&mut edited)?;
                file.jobs[index] = edited.clone();
                Ok(edited)
            })?
    }

    pub fn pause(
        &self,
        reference: &str,
        reason: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<JobRecord, JobError> {
        let at = self.zone.at(now);
        self.change(reference, now, |job| {
            job.pause(at, reason);
            Ok(())
        })
    }

    pub fn resume(&self, reference: &str, now: DateTime<Utc>) -> Result<JobRecord, JobError> {
        let zone = self.zone;
        self.change(reference, now, |job| job.resume(now, zone))
    }

    /// Makes the job due now (the daemon notices the change within a second).
    pub fn trigger(&self, reference: &str, now: DateTime<Utc>) -> Result<JobRecord, JobError> {
        let at = self.zone.at(now);
        self.change(reference, now, |job| {
            job.trigger(at);
            Ok(())
        })
    }

    pub fn edit(
        &self,
        reference: &str,
        edit: JobEdit,
        now: DateTime<Utc>,
    ) -> Result<JobRecord, JobError> {
        let zone = self.zone;
        self.change(reference, now, |job| {
            if let Some(text) = &edit.schedule {
                let (stored, schedule) = parse_schedule(text, now, zone)?;
                let next = schedule.next_run(now, None, zone);
                if next.is_none() && schedule.is_once() {
                    return Err(JobError::RescheduledIntoPast {
                        schedule: text.clone(),
                    });
                }
                job.set("schedule_display", stored["display"].clone());
                job.set("schedule", stored);
                job.set_time("next_run_at", next);
            }
            if let Some(prompt) = edit.prompt {
                job.set("prompt", json!(prompt));
            }
            if let Some(name) = edit.name.filter(|n| !n.trim().is_empty()) {
                job.set("name", json!(name.trim()));
            }
            if let Some(deliver) = edit.deliver {
                target::validate(&deliver, job.origin().is_some())?;
                job.set("deliver", json!(deliver));
            }
            if let Some(times) = edit.repeat {
                let (_, completed) = job.repeat();
                let times = (times > 0).then_some(times);
                job.set("repeat", json!({"times": times, "completed": completed}));
            }
            if let Some(skills) = edit.skills {
                let skills = normalize_skills(skills);
                job.set("skill", skills.first().map_or(Value::Null, |s| json!(s)));
                job.set("skills", json!(skills));
            }
            let optional = |v: String| {
                if v.trim().is_empty() {
                    Value::Null
                } else {
                    json!(v.trim())
                }
            };
            if let Some(model) = edit.model {
                job.set("model", optional(model));
            }
            if let Some(provider) = edit.provider {
                job.set("provider", optional(provider));
            }
            Ok(())
        })
    }

    /// Removes the job and its run records.
    pub fn remove(&self, reference: &str, now: DateTime<Utc>) -> Result<JobRecord, JobError> {
        let removed =
            self.store
                .update(&self.stamp(now), |file| -> Result<JobRecord, JobError> {
                    let index =
                        find_job(&file.jobs, reference)?.ok_or_else(|| not_found(reference))?;
                    Ok(file.jobs.remove(index))
                })??;
        if let Some(dir) = super::output::job_output_dir(&self.store.output_dir(), removed.id())
            && dir.exists()
        {
            let _ = std::fs::remove_dir_all(dir);
        }
        Ok(removed)
    }
}

fn not_found(reference: &str) -> JobError {
    JobError::NotFound {
        reference: reference.to_owned(),
    }
}

/// One line about a job, for chat and the terminal.
pub fn summary(job: &JobRecord) -> String {
    let state = job.state();
    let next = job
        .get("next_run_at")
        .and_then(Value::as_str)
        .unwrap_or("-")
        .to_owned();
    let last = match job.last_status() {
        Some(status) => format!(", last {status}"),
        None => String::new(),
    };
    format!(
        "{} [{}] {} — {state}, next {next}{last}",
        job.id(),
        job.schedule_display(),
        job.name()
    )
}
