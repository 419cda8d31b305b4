//! The clips of spoken replies (`cache/audio/reply_*.ogg`) are kept as long as the inbound
//! journal keeps its rows (a week), then the janitor removes them, so the cache does not grow
//! for as long as the daemon runs. A reply still owed after that is sent as text: delivery
//! falls back when its clip is gone. Files the `text_to_speech` tool saved (`tts_*`) are the
//! user's and stay.

use std::path::Path;
use std::time::{Duration, SystemTime};

/// Removes the spoken-reply clips in `dir` last written more than `max_age` before `now`;
/// returns how many went.
pub fn prune_spoken_replies(dir: &Path, max_age: Duration, now: SystemTime) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !(name.starts_with("reply_") && name.ends_with(".ogg")) {
            continue;
        }
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|modified| now.duration_since(modified).ok())
            .is_some_and(|age| age > max_age);
        if old {
            match std::fs::remove_file(entry.path()) {
                Ok(()) => removed += 1,
                Err(e) => {
                    tracing::warn!(file = %name, error = %e, "cannot remove an old spoken reply")
                }
            }
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_old_reply_clips_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let week = Duration::from_secs(7 * 86_400);
        let now = SystemTime::now();
        for name in [
            "reply_old.ogg",
            "reply_new.ogg",
            "tts_old.ogg",
            "reply_old.txt",
        ] {
            std::fs::write(dir.path().join(name), b"x").unwrap();
        }
        for name in ["reply_old.ogg", "tts_old.ogg", "reply_old.txt"] {
            let file = std::fs::File::options()
                .write(true)
                .open(dir.path().join(name))
                .unwrap();
            file.set_modified(now - week - Duration::from_secs(60))
                .unwrap();
        }
        assert_eq!(prune_spoken_replies(dir.path(), week, now), 1);
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["reply_new.ogg", "reply_old.txt", "tts_old.ogg"]);
        assert_eq!(
            prune_spoken_replies(&dir.path().join("missing"), week, now),
            0
        );
    }
}
