//! Scheduled jobs, compatible with Hermes's `cron/`: the jobs file and its lock (`store`,
//! over the home or, several instances on PostgreSQL, the shared database: `backing`,
//! `shared`),
//! job records (`job`), schedules and the grace rule (`schedule`), the due scan (`due`),
//! delivery targets (`target`), run records and the silence rule (`output`), and skills as
//! run context (`skills`), and where a job may work (`workdir`). Running jobs inside the daemon is `gateway::cron`; this module
//! never touches state.db or a platform.

mod backing;
pub mod due;
pub mod error;
pub mod job;
pub mod ops;
pub mod output;
pub mod raw;
pub mod schedule;
pub mod script;
pub mod shared;
pub mod skills;
pub mod store;
pub mod target;
pub mod workdir;

pub use error::JobError;
pub use job::{JobRecord, NewJob};
pub use schedule::Zone;
pub use store::{JobsFile, JobsStore, JobsVersion, StoreError};

/// Resolves a job reference the way the reference does: an exact id first, then an exact
/// name (an error when two jobs share it).
pub fn find_job(jobs: &[JobRecord], reference: &str) -> Result<Option<usize>, JobError> {
    let reference = reference.trim();
    if let Some(index) = jobs.iter().position(|j| j.id() == reference) {
        return Ok(Some(index));
    }
    let named: Vec<usize> = jobs
        .iter()
        .enumerate()
        .filter(|(_, j)| j.name() == reference)
        .map(|(i, _)| i)
        .collect();
    match named.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(*one)),
        many => Err(JobError::AmbiguousName {
            reference: reference.to_owned(),
            ids: many.iter().map(|i| jobs[*i].id().to_owned()).collect(),
        }),
    }
}
