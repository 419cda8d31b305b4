//! What the scheduler remembers of `jobs.json` between ticks: one brief per job (id,
//! enabled, next run — what decides due-ness), tied to the file version it was read from,
//! plus which jobs were found to have nothing to do until the file changes (a schedule
//! that cannot be read, a one-shot another process claimed). A job is read in full only
//! when a tick has something to do with it; a tick with nothing due costs a `stat`.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde_json::value::RawValue;

use crate::cron::raw::Brief;
use crate::cron::{JobRecord, JobsVersion};

/// The briefs of one version of the file, in file order.
#[derive(Debug, Default)]
pub(super) struct Index {
    /// `None`: there were no jobs stored.
    pub stamp: Option<JobsVersion>,
    pub jobs: Vec<Entry>,
}

#[derive(Debug)]
pub(super) struct Entry {
    pub brief: Brief,
    /// Looked at and found to need nothing until the file changes.
    pub dormant: bool,
}

impl Index {
    pub fn build(stamp: Option<JobsVersion>, jobs: &[&RawValue]) -> Self {
        Self {
            stamp,
            jobs: jobs
                .iter()
                .map(|raw| Entry {
                    brief: Brief::of_raw(raw),
                    dormant: false,
                })
                .collect(),
        }
    }

    /// Positions of the jobs a tick must read: enabled, not running here, not dormant, and
    /// with no next run or one at or before `now` — and jobs without an id, to report them.
    pub fn candidates(&self, now: DateTime<Utc>, running: &dyn Fn(&str) -> bool) -> Vec<usize> {
        self.jobs
            .iter()
            .enumerate()
            .filter(|(_, entry)| {
                let brief = &entry.brief;
                if entry.dormant {
                    return false;
                }
                if brief.id.is_empty() {
                    return true;
                }
                brief.enabled && brief.next_run_at.is_none_or(|t| t <= now) && !running(&brief.id)
            })
            .map(|(i, _)| i)
            .collect()
    }

    /// The first job with this id (as the jobs file is searched everywhere).
    pub fn position(&self, id: &str) -> Option<usize> {
        self.jobs.iter().position(|e| &*e.brief.id == id)
    }

    pub fn set_dormant(&mut self, position: usize) {
        if let Some(entry) = self.jobs.get_mut(position) {
            entry.dormant = true;
        }
    }

    /// After writing `changes` (a changed record, or `None` for a removed job) as `stamp`.
    pub fn apply(
        &mut self,
        changes: &BTreeMap<usize, Option<JobRecord>>,
        stamp: Option<JobsVersion>,
    ) {
        let old = std::mem::take(&mut self.jobs);
        self.jobs = old
            .into_iter()
            .enumerate()
            .filter_map(|(i, entry)| match changes.get(&i) {
                None => Some(entry),
                Some(None) => None,
                Some(Some(job)) => Some(Entry {
                    brief: Brief::of_record(job),
                    dormant: false,
                }),
            })
            .collect();
        self.stamp = stamp;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cron::raw::split;

    #[test]
    fn candidates_are_the_jobs_that_may_be_due() {
        let text = r#"[
            {"id": "past", "next_run_at": "2026-01-01T08:00:00+00:00"},
            {"id": "future", "next_run_at": "2026-01-01T10:00:00+00:00"},
            {"id": "unset", "next_run_at": null},
            {"id": "paused", "enabled": false, "next_run_at": "2026-01-01T08:00:00+00:00"},
            {"id": "busy", "next_run_at": "2026-01-01T08:00:00+00:00"},
            {"prompt": "no id"}
        ]"#;
        let mut index = Index::build(None, &split(text.as_bytes()).unwrap());
        let now = "2026-01-01T09:00:00Z".parse().unwrap();
        let busy = |id: &str| id == "busy";
        assert_eq!(index.candidates(now, &busy), vec![0, 2, 5]);
        index.set_dormant(2);
        assert_eq!(index.candidates(now, &busy), vec![0, 5]);
        let mut changes = BTreeMap::new();
        changes.insert(0, None);
        let mut edited = crate::cron::raw::record(split(text.as_bytes()).unwrap()[2]);
        edited.set(
            "next_run_at",
            serde_json::json!("2026-01-01T08:30:00+00:00"),
        );
        changes.insert(2, Some(edited));
        index.apply(&changes, None);
        assert_eq!(index.position("future"), Some(0));
        assert_eq!(
            index.candidates(now, &busy),
            vec![1, 4],
            "an edited job is looked at again"
        );
    }
}
