//! The Markdown file each cron run leaves in `cron/output/<job_id>/`: one per run, its name
//! the local start time down to the second, so sorting names sorts runs and the newest few
//! survive pruning (Python Hermes lays its runs out identically). Also here: a reply that
//! says there is nothing to report stays on disk but never reaches a chat.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use chrono::{DateTime, FixedOffset};

use super::store::{StoreError, write_atomic};

/// The reply a job gives when it has nothing to say.
pub const SILENT_MARKER: &str = "[SILENT]";

/// Whether a reply asks for no delivery: the marker (or its bracketless spellings) as the
/// whole reply or as its first or last line, or the bracketed marker leading the reply.
/// A marker in the middle of a sentence is content.
pub fn is_silent(reply: &str) -> bool {
    let is_token = |line: &str| {
        let words = line
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .to_uppercase();
        matches!(
            words.as_str(),
            "[SILENT]" | "SILENT" | "NO_REPLY" | "NO REPLY"
        )
    };
    let trimmed = reply.trim();
    if trimmed.is_empty() {
        return false;
    }
    let lines: Vec<&str> = trimmed.lines().filter(|l| !l.trim().is_empty()).collect();
    is_token(trimmed)
        || lines.first().is_some_and(|l| is_token(l))
        || lines.last().is_some_and(|l| is_token(l))
        || trimmed.to_uppercase().starts_with(SILENT_MARKER)
}

/// One run's record.
#[derive(Debug, Clone)]
pub struct RunRecord<'a> {
    pub job_id: &'a str,
    pub job_name: &'a str,
    pub schedule: &'a str,
    pub prompt: &'a str,
    pub ran_at: DateTime<FixedOffset>,
    /// `Ok(reply)` or `Err(error)`.
    pub result: Result<&'a str, &'a str>,
}

impl RunRecord<'_> {
    /// The Markdown document, with the reference's headings so tools reading either agree.
    pub fn render(&self) -> String {
        let when = self.ran_at.format("%Y-%m-%d %H:%M:%S");
        let (title, body) = match self.result {
            Ok(reply) => {
                let reply = if reply.trim().is_empty() {
                    "(No response generated)"
                } else {
                    reply
                };
                (
                    self.job_name.to_owned(),
                    format!("## Response\n\n{reply}\n"),
                )
            }
            Err(error) => (
                format!("{} (FAILED)", self.job_name),
                format!("## Error\n\n```\n{error}\n```\n"),
            ),
        };
        format!(
            "# Cron Job: {title}\n\n**Job ID:** {}\n**Run Time:** {when}\n**Schedule:** {}\n\n## Prompt\n\n{}\n\n{body}",
            self.job_id, self.schedule, self.prompt
        )
    }
}

/// A job id is one path component under `output/`; anything else is refused.
pub fn job_output_dir(output_root: &Path, job_id: &str) -> Option<PathBuf> {
    let id = job_id.trim();
    let safe = !id.is_empty() && id != "." && id != ".." && !id.contains(['/', '\\']);
    safe.then(|| output_root.join(id))
}

/// Writes the record (0600 in a 0700 directory) and keeps the newest `keep` files (`keep`
/// ≤ 0 keeps all). Returns the file written.
pub fn save(output_root: &Path, record: &RunRecord<'_>, keep: i64) -> Result<PathBuf, StoreError> {
    let dir = job_output_dir(output_root, record.job_id).ok_or_else(|| StoreError::Corrupt {
        place: output_root.display().to_string(),
        reason: format!("job id {:?} cannot name a directory", record.job_id),
    })?;
    let io = |source| StoreError::Io {
        path: dir.clone(),
        source,
    };
    // Every level it creates (`cron/`, `output/`, the job's) is private, not only the last.
    crate::home::private::create_dir_all(&dir).map_err(io)?;
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).map_err(io)?;
    let file = dir.join(format!("{}.md", record.ran_at.format("%Y-%m-%d_%H-%M-%S")));
    write_atomic(&file, record.render().as_bytes())?;
    if keep > 0 {
        prune(&dir, keep as usize);
    }
    Ok(file)
}

fn prune(dir: &Path, keep: usize) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md") && p.is_file())
        .collect();
    files.sort();
    let excess = files.len().saturating_sub(keep);
    for stale in &files[..excess] {
        let _ = fs::remove_file(stale);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn silence_is_the_marker_alone_or_on_its_own_line() {
        assert!(is_silent("[SILENT]"));
        assert!(is_silent("  no_reply \n"));
        assert!(is_silent("2 items filtered\n\n[SILENT]"));
        assert!(is_silent("[SILENT] nothing new"));
        assert!(!is_silent("I thought of staying [SILENT] but here is news"));
        assert!(!is_silent("Silent retry succeeded"));
        assert!(!is_silent("   "));
    }

    #[test]
    fn records_are_written_and_pruned_and_ids_cannot_escape() {
        let dir = tempfile::tempdir().unwrap();
        let base = DateTime::parse_from_rfc3339("2026-03-01T10:00:00+00:00").unwrap();
        for i in 0..3 {
            let record = RunRecord {
                job_id: "abc123def456",
                job_name: "news",
                schedule: "every 60m",
                prompt: "summarise",
                ran_at: base + chrono::Duration::seconds(i),
                result: Ok("all quiet"),
            };
            save(dir.path(), &record, 2).unwrap();
        }
        let kept: Vec<_> = fs::read_dir(dir.path().join("abc123def456"))
            .unwrap()
            .collect();
        assert_eq!(kept.len(), 2);
        let text =
            fs::read_to_string(dir.path().join("abc123def456/2026-03-01_10-00-02.md")).unwrap();
        assert!(
            text.starts_with("# Cron Job: news\n\n**Job ID:** abc123def456\n"),
            "{text}"
        );
        assert!(text.contains("## Response\n\nall quiet\n"));
        assert!(job_output_dir(dir.path(), "../x").is_none());
    }
}
