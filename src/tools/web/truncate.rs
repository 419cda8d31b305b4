//! A page longer than its budget: the model sees the head (about 75 %) and the tail (25 %),
//! cut on line boundaries, and a footer saying where the whole text was saved and which
//! `read_file` call shows the part left out (Hermes's behaviour; the words are ours).

use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// `content` cut to about `limit` characters, or unchanged when it fits. The full text is
/// written to `dir` (0600 file, named after the URL and the text) when it does not fit.
pub fn fit(content: &str, limit: usize, url: &str, dir: &Path) -> (String, bool) {
    let total = content.chars().count();
    if total <= limit {
        return (content.to_owned(), false);
    }
    let head_budget = limit * 3 / 4;
    let tail_budget = limit - head_budget;
    let head_end = content
        .char_indices()
        .nth(head_budget)
        .map_or(content.len(), |(i, _)| i);
    let tail_start = content
        .char_indices()
        .nth(total - tail_budget)
        .map_or(content.len(), |(i, _)| i);
    let mut head = &content[..head_end];
    if let Some(nl) = head.rfind('\n').filter(|nl| *nl > head.len() / 2) {
        head = &head[..nl];
    }
    let mut tail = &content[tail_start..];
    if let Some(nl) = tail.find('\n').filter(|nl| *nl < tail.len() / 2) {
        tail = &tail[nl + 1..];
    }
    let saved = save(content, url, dir);
    let shown = head.chars().count() + tail.chars().count();
    let mut footer =
        format!("[Page cut to fit: {shown} of {total} characters shown (beginning and end).");
    match saved {
        Ok(path) => footer.push_str(&format!(
            " The whole text is saved at {}; the omitted part starts near line {} \
             (read_file with that path and offset).]",
            path.display(),
            head.matches('\n').count() + 2
        )),
        Err(error) => footer.push_str(&format!(" The whole text could not be saved: {error}.]")),
    }
    (
        format!("{head}\n\n[... middle left out ...]\n\n{tail}\n\n{footer}"),
        true,
    )
}

fn save(content: &str, url: &str, dir: &Path) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let digest = Sha256::new()
        .chain_update(url.as_bytes())
        .chain_update([0])
        .chain_update(content.as_bytes())
        .finalize();
    let path = dir.join(format!("extract_{}.md", &hex::encode(digest)[..16]));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(&path)?;
    file.write_all(content.as_bytes())?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_pages_pass_whole() {
        let dir = tempfile::tempdir().unwrap();
        let (text, cut) = fit("short page", 100, "https://a.test/", dir.path());
        assert_eq!((text.as_str(), cut), ("short page", false));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn long_pages_keep_head_and_tail_and_save_the_whole_text() {
        let dir = tempfile::tempdir().unwrap();
        let page: String = (0..2000)
            .map(|i| format!("line {i:04} ünïcode\n"))
            .collect();
        let (text, cut) = fit(&page, 4000, "https://a.test/long", dir.path());
        assert!(cut);
        assert!(text.starts_with("line 0000"));
        assert!(text.contains("line 1999"));
        assert!(!text.contains("line 1000 "));
        assert!(
            text.chars().count() < 4000 + 400,
            "{}",
            text.chars().count()
        );
        let saved: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(saved.len(), 1);
        let path = saved[0].as_ref().unwrap().path();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), page);
        assert!(text.contains(&path.display().to_string()));
        assert!(text.contains("read_file"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }
}
