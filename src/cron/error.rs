//! Why a job operation (create, edit, pause, resume, run now, remove) was refused. Every
//! front end shows the Display text to the person who asked, so each variant reads as a
//! sentence naming the job reference, schedule or target it is about.

use super::schedule::{ONESHOT_GRACE_SECONDS, ScheduleError};
use super::store::StoreError;
use super::target::TargetError;

#[derive(Debug, thiserror::Error)]
pub enum JobError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    #[error(transparent)]
    Target(#[from] TargetError),
    #[error("no scheduled job has the id or name {reference:?}")]
    NotFound { reference: String },
    /// A name several jobs share; `ids` lists them so the user can pick one.
    #[error("{} jobs are named {reference:?}; use the id instead ({})", ids.len(), ids.join(", "))]
    AmbiguousName { reference: String, ids: Vec<String> },
    #[error("the job has nothing to run: give it a prompt, or skills to load")]
    NothingToRun,
    /// A one-shot created for a moment already behind us.
    #[error(
        "{run_at} has already passed (a one-shot may start at most {ONESHOT_GRACE_SECONDS} s late)"
    )]
    StartPassed { run_at: String },
    /// An edit that moves a one-shot to a moment already behind us.
    #[error("{schedule:?} has already passed")]
    RescheduledIntoPast { schedule: String },
    #[error("this one-shot's time has passed (beyond the 120 s grace), so it would never run")]
    ResumeTooLate,
}
