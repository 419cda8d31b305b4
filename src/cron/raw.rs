//! `jobs.json` without building every job: the file split into each job's JSON text
//! (borrowed from the bytes read), the few fields that decide whether a job may be due
//! (`Brief`, what the daemon keeps between ticks), and a writer that takes each job either
//! as read or as changed. With 10,000 jobs, keeping every job as a parsed map cost the
//! daemon hundreds of MB; a brief is a few dozen bytes.

use chrono::{DateTime, Utc};
use indexmap::IndexMap;
use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::job::JobRecord;

/// Why the bytes of `jobs.json` are not a list of jobs.
#[derive(Debug, thiserror::Error)]
pub enum ShapeError {
    #[error(transparent)]
    NotUtf8(#[from] std::str::Utf8Error),
    #[error(transparent)]
    Syntax(#[from] serde_json::Error),
    #[error("expected an object whose \"jobs\" is a list of job objects")]
    NotAJobList,
}

/// The jobs of one version of the file, each still its JSON text. Accepts what the
/// reference accepts: `{"jobs": [...]}` or a bare list, a UTF-8 byte-order mark first.
pub fn split(bytes: &[u8]) -> Result<Vec<&RawValue>, ShapeError> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let text = std::str::from_utf8(bytes)?;
    // First for a precise syntax error, then for the shape.
    serde_json::from_str::<serde::de::IgnoredAny>(text)?;
    #[derive(serde::Deserialize)]
    struct Doc<'a> {
        #[serde(borrow, default)]
        jobs: Vec<&'a RawValue>,
    }
    let shape = |_| ShapeError::NotAJobList;
    let jobs = match text.trim_start().as_bytes().first() {
        Some(b'[') => serde_json::from_str::<Vec<&RawValue>>(text).map_err(shape)?,
        Some(b'{') => serde_json::from_str::<Doc>(text).map_err(shape)?.jobs,
        _ => return Err(ShapeError::NotAJobList),
    };
    if jobs.iter().any(|job| !job.get().starts_with('{')) {
        return Err(ShapeError::NotAJobList);
    }
    Ok(jobs)
}

/// One job's text as a record (every field, in order). `split` checked it is an object.
pub fn record(raw: &RawValue) -> JobRecord {
    JobRecord::from_map(serde_json::from_str(raw.get()).unwrap_or_default())
}

/// What decides whether a job may be due, kept per job between ticks.
#[derive(Debug, Clone, PartialEq)]
pub struct Brief {
    pub id: Box<str>,
    pub enabled: bool,
    pub next_run_at: Option<DateTime<Utc>>,
}

impl Brief {
    /// Reads only `id`, `enabled` and `next_run_at`; the other fields are skipped unparsed.
    pub fn of_raw(raw: &RawValue) -> Self {
        #[derive(serde::Deserialize)]
        struct Fields {
            id: Option<Value>,
            enabled: Option<Value>,
            next_run_at: Option<Value>,
        }
        match serde_json::from_str::<Fields>(raw.get()) {
            Ok(fields) => {
                let mut map = IndexMap::new();
                for (key, value) in [
                    ("id", fields.id),
                    ("enabled", fields.enabled),
                    ("next_run_at", fields.next_run_at),
                ] {
                    if let Some(value) = value {
                        map.insert(key.to_owned(), value);
                    }
                }
                Self::of_record(&JobRecord::from_map(map))
            }
            // A duplicated key, say: the full reading decides, as it does everywhere else.
            Err(_) => Self::of_record(&record(raw)),
        }
    }

    /// The same reading of a record in memory (the accessors are the one definition).
    pub fn of_record(job: &JobRecord) -> Self {
        Self {
            id: job.id().into(),
            enabled: job.enabled(),
            next_run_at: job.next_run_at().map(|t| t.to_utc()),
        }
    }
}

/// A job to write: as it was read, or a changed record.
#[derive(Debug, Clone, Copy)]
pub enum Item<'a> {
    Raw(&'a RawValue),
    Record(&'a JobRecord),
}

impl Serialize for Item<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            // Parsed one at a time while writing, so the output is formatted like a changed
            // job and only one job is ever held as a map.
            Item::Raw(raw) => serde_json::from_str::<IndexMap<String, Value>>(raw.get())
                .map_err(serde::ser::Error::custom)?
                .serialize(serializer),
            Item::Record(job) => job.serialize(serializer),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_shapes_split_and_anything_else_is_refused() {
        let doc = br#"{"jobs": [{"id": "a"}, {"id": "b", "x": [1]}], "updated_at": "t"}"#;
        let jobs = split(doc).unwrap();
        assert_eq!(jobs.len(), 2);
        assert_eq!(jobs[1].get(), r#"{"id": "b", "x": [1]}"#);
        assert_eq!(split(b"\xEF\xBB\xBF[{\"id\": \"x\"}]").unwrap().len(), 1);
        assert!(split(br#"{"updated_at": "t"}"#).unwrap().is_empty());
        for bad in [
            &br#"{"jobs": [1]}"#[..],
            b"[\"x\"]",
            b"42",
            b"{\"jobs\": {}}",
            b"{",
        ] {
            assert!(split(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn a_brief_reads_like_the_record() {
        let text = r#"[{"id": "a1", "prompt": "p", "next_run_at": "2026-01-01T09:00:00+01:00", "enabled": false},
                       {"id": "b2", "next_run_at": null}, {"id": "c3", "id": "c4"}]"#;
        let jobs = split(text.as_bytes()).unwrap();
        for raw in &jobs {
            assert_eq!(Brief::of_raw(raw), Brief::of_record(&record(raw)));
        }
        let first = Brief::of_raw(jobs[0]);
        assert!(!first.enabled);
        assert_eq!(
            first.next_run_at.unwrap().to_rfc3339(),
            "2026-01-01T08:00:00+00:00"
        );
        assert_eq!(
            &*Brief::of_raw(jobs[2]).id,
            "c4",
            "the last of a duplicated key"
        );
    }
}
