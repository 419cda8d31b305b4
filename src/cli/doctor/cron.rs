//! The scheduled-jobs file: readable (and how many jobs, and any that cannot be scheduled),
//! or corrupt; and any earlier corrupt copy the daemon moved aside, so the owner can repair
//! and restore it.

use super::check::Check;
use crate::cron::{JobsStore, StoreError};
use crate::home::HermesHome;

pub fn jobs_file(home: &HermesHome) -> Vec<Check> {
    let store = JobsStore::new(home.cron_dir());
    let path = store.jobs_path();
    let mut checks = Vec::new();
    match store.load() {
        Ok(file) if !path.exists() => {
            debug_assert!(file.jobs.is_empty());
            checks.push(Check::ok("cron", "no scheduled jobs"));
        }
        Ok(file) => {
            let broken: Vec<String> = file
                .jobs
                .iter()
                .filter_map(|job| job.schedule().err().map(|e| format!("{}: {}", job.id(), e.0)))
                .collect();
            if broken.is_empty() {
                checks.push(Check::ok("cron", format!("{} scheduled job(s), all schedulable", file.jobs.len())));
            } else {
                checks.push(
                    Check::warn("cron", format!("{} job(s) cannot be scheduled and are skipped: {}", broken.len(), broken.join("; ")))
                        .hint("fix them with `hermesd cron edit <id> --schedule ...` or remove them"),
                );
            }
        }
        Err(e @ StoreError::Corrupt { .. }) => checks.push(
            Check::error("cron", e.to_string())
                .hint("no scheduled job runs until it is repaired; the daemon moves it aside as jobs.json.corrupt-<time> and starts an empty list"),
        ),
        Err(e) => checks.push(Check::error("cron", e.to_string())),
    }
    let aside: Vec<String> = std::fs::read_dir(store.dir())
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|name| name.starts_with("jobs.json.corrupt-"))
                .collect()
        })
        .unwrap_or_default();
    if !aside.is_empty() {
        checks.push(
            Check::warn(
                "cron",
                format!(
                    "corrupt jobs file(s) kept aside in {}: {}",
                    store.dir().display(),
                    aside.join(", ")
                ),
            )
            .hint("repair one and merge its jobs back with `hermesd cron add`, or delete it"),
        );
    }
    checks
}
