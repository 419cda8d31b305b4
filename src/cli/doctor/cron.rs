//! The scheduled jobs: readable (and how many jobs, and any that cannot be scheduled), or
//! corrupt; any earlier corrupt copy the daemon moved aside, so the owner can repair and
//! restore it; and, with `state.backend: postgres`, a home `cron/jobs.json` that differs
//! from the shared jobs and is therefore not read.

use super::check::Check;
use crate::config::Config;
use crate::cron::{JobsStore, StoreError};
use crate::home::HermesHome;

pub fn jobs_file(home: &HermesHome, config: Option<&Config>) -> Vec<Check> {
    // Only looks: the doctor neither seeds the shared copy nor moves anything.
    let store = match config.map(|config| crate::cron::shared::configured_store(home, config)) {
        Some(Ok(store)) => store,
        Some(Err(e)) => return vec![Check::error("cron", e.to_string())],
        None => JobsStore::new(home.cron_dir()),
    };
    let mut checks = Vec::new();
    match store.load() {
        Ok(_) if matches!(store.version(), Ok(None)) => {
            checks.push(Check::ok("cron", "no scheduled jobs"));
        }
        Ok(file) => {
            let broken: Vec<String> = file
                .jobs
                .iter()
                .filter_map(|job| job.schedule().err().map(|e| format!("{}: {}", job.id(), e.0)))
                .collect();
            if broken.is_empty() {
                checks.push(Check::ok("cron", format!("{} scheduled job(s) in {}, all schedulable", file.jobs.len(), store.describe())));
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
    let aside = store.aside_names().unwrap_or_default();
    if !aside.is_empty() {
        let place = if store.is_shared() {
            "the shared database (cron/)".to_owned()
        } else {
            store.dir().display().to_string()
        };
        checks.push(
            Check::warn(
                "cron",
                format!(
                    "corrupt jobs file(s) kept aside in {place}: {}",
                    aside.join(", ")
                ),
            )
            .hint("repair one and merge its jobs back with `hermesd cron add`, or delete it"),
        );
    }
    if let Ok(Some(unused)) = store.unused_home_copy() {
        checks.push(
            Check::warn(
                "cron",
                format!(
                    "{} differs from the jobs in the shared database and is not read (state.backend: postgres)",
                    unused.display()
                ),
            )
            .hint("`hermesd cron import` replaces the shared jobs with it; `hermesd cron export` overwrites it with them; or delete it"),
        );
    }
    checks
}
