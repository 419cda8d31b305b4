//! Where a job's tools may work. A job's `workdir` becomes its run's working directory and
//! file-tool root, so it must not widen what the agent may reach: a workdir set by the model
//! (the `cronjob` tool) must lie inside the allowed roots of the turn that created it, and at
//! run time inside the daemon's (its working directory and the Hermes home). The operator's
//! `hermesd cron add --workdir` may name any existing directory: the job then records
//! [`SET_BY_KEY`] = [`OPERATOR`], and only such a job runs outside the roots. A stored job
//! whose workdir lies outside and was not set by the operator is not run; its chat is told why.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::JobRecord;

/// The job field recording who chose the workdir.
pub const SET_BY_KEY: &str = "workdir_set_by";
/// [`SET_BY_KEY`]'s value for the operator (the CLI).
pub const OPERATOR: &str = "operator";

/// Why a workdir is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkdirError {
    #[error("workdir {0:?} is not an absolute path; give the full path of a directory")]
    NotAbsolute(String),
    #[error("workdir {0} is not an existing directory")]
    NotADirectory(String),
    #[error(
        "workdir {path} lies outside the directories the agent may use ({roots}); choose one inside them"
    )]
    OutsideRoots { path: String, roots: String },
}

/// `workdir` resolved (symlinks followed), if it is an existing absolute directory.
pub fn existing_dir(workdir: &str) -> Result<PathBuf, WorkdirError> {
    let path = Path::new(workdir.trim());
    if !path.is_absolute() {
        return Err(WorkdirError::NotAbsolute(workdir.to_owned()));
    }
    match std::fs::canonicalize(path) {
        Ok(real) if real.is_dir() => Ok(real),
        _ => Err(WorkdirError::NotADirectory(workdir.to_owned())),
    }
}

/// `workdir` resolved, if it is an existing directory inside one of `roots` (each compared
/// with its symlinks resolved).
pub fn inside_roots(workdir: &str, roots: &[PathBuf]) -> Result<PathBuf, WorkdirError> {
    let real = existing_dir(workdir)?;
    let inside = roots
        .iter()
        .filter_map(|root| std::fs::canonicalize(root).ok())
        .any(|root| real.starts_with(root));
    if inside {
        Ok(real)
    } else {
        Err(WorkdirError::OutsideRoots {
            path: workdir.to_owned(),
            roots: roots
                .iter()
                .map(|r| r.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        })
    }
}

/// Whether the operator chose `job`'s workdir.
pub fn set_by_operator(job: &JobRecord) -> bool {
    job.get(SET_BY_KEY).and_then(Value::as_str) == Some(OPERATOR)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workdir_must_be_an_existing_directory_inside_a_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(root.join("proj/sub")).unwrap();
        let roots = vec![root.join("proj")];
        let sub = root.join("proj/sub").display().to_string();
        assert_eq!(inside_roots(&sub, &roots), Ok(root.join("proj/sub")));
        assert!(matches!(
            inside_roots("/", &roots),
            Err(WorkdirError::OutsideRoots { .. })
        ));
        assert!(matches!(
            inside_roots(&format!("{sub}/../../.."), &roots),
            Err(WorkdirError::OutsideRoots { .. })
        ));
        assert_eq!(
            inside_roots("proj", &roots),
            Err(WorkdirError::NotAbsolute("proj".into()))
        );
        let missing = root.join("proj/nope").display().to_string();
        assert_eq!(
            inside_roots(&missing, &roots),
            Err(WorkdirError::NotADirectory(missing.clone()))
        );
        // A link inside a root that points out of it is judged by its target.
        std::os::unix::fs::symlink("/", root.join("proj/escape")).unwrap();
        let link = root.join("proj/escape").display().to_string();
        assert!(matches!(
            inside_roots(&link, &roots),
            Err(WorkdirError::OutsideRoots { .. })
        ));
    }
}
