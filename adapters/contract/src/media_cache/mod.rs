//! The media cache in the operator's home, kept owner-only whatever the process umask: every
//! adapter stores downloads through these two calls, so none can leave a file readable by
//! other users (SECURITY.md, "Private on disk"), and names every file with
//! [`safe_file_name`].

use std::io;
use std::path::Path;

use tokio::io::AsyncWriteExt;

mod file_name;

pub use file_name::{MAX_FILE_NAME_BYTES, safe_file_name};

/// Creates `dir` and its missing parents with mode 0700.
pub async fn create_private_dir(dir: &Path) -> io::Result<()> {
    tokio::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .await
}

/// Writes `bytes` to `path` (created 0600 in a 0700 `dir`, replaced if present), flushed
/// before it returns: tokio's file writes run in the background, and the path is handed on
/// as soon as this returns.
pub async fn write_private(dir: &Path, path: &Path, bytes: &[u8]) -> io::Result<()> {
    create_private_dir(dir).await?;
    let mut file = tokio::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .await?;
    file.write_all(bytes).await?;
    file.flush().await
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[tokio::test]
    async fn a_written_file_is_private_and_readable_at_once() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("cache/media");
        let path = dir.join("a.txt");
        write_private(&dir, &path, b"remember the milk")
            .await
            .unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"remember the milk");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&dir), 0o700);
    }
}
