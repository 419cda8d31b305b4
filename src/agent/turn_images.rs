//! The image parts of a journaled gateway turn, kept as files under the home
//! (`cache/turn_images/`) from the moment the turn starts until it ends. state.db rows keep
//! text only (the Python Hermes reads them), so a turn resumed after a crash reads its photos
//! back from here and sends the same image parts the first attempt did.

use std::path::PathBuf;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use sha2::{Digest, Sha256};

use super::message::ImagePart;
use crate::home::HermesHome;

/// The formats an [`ImagePart`] can hold, with the file extension each is kept under.
const FORMATS: &[(&str, &str)] = &[
    ("image/png", "png"),
    ("image/jpeg", "jpg"),
    ("image/gif", "gif"),
    ("image/webp", "webp"),
];

fn dir(home: &HermesHome) -> PathBuf {
    home.path().join("cache").join("turn_images")
}

/// A file-name stem for the inbound event (event ids are platform text, not path-safe).
fn stem(inbound: (&str, &str)) -> String {
    let mut hash = Sha256::new();
    hash.update(inbound.0.as_bytes());
    hash.update([0]);
    hash.update(inbound.1.as_bytes());
    hex::encode(&hash.finalize()[..12])
}

/// Keeps `images` for the event's turn (each written to a temporary name, then renamed, so
/// a crash never leaves half an image under the real name).
pub fn save(home: &HermesHome, inbound: (&str, &str), images: &[ImagePart]) -> std::io::Result<()> {
    if images.is_empty() {
        return Ok(());
    }
    let dir = dir(home);
    crate::home::private::create_dir_all(&dir)?;
    let stem = stem(inbound);
    for (index, image) in images.iter().enumerate() {
        let Some((_, ext)) = FORMATS.iter().find(|(mime, _)| *mime == image.media_type()) else {
            continue;
        };
        let bytes = STANDARD
            .decode(image.base64())
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        let path = dir.join(format!("{stem}.{index}.{ext}"));
        let partial = dir.join(format!("{stem}.{index}.partial"));
        crate::home::private::write(&partial, &bytes)?;
        std::fs::rename(&partial, &path)?;
    }
    Ok(())
}

/// The images kept for the event's turn, in their original order.
pub fn load(home: &HermesHome, inbound: (&str, &str)) -> Vec<ImagePart> {
    let stem = stem(inbound);
    let Ok(entries) = std::fs::read_dir(dir(home)) else {
        return Vec::new();
    };
    let mut found: Vec<(usize, ImagePart)> = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let mut parts = name.splitn(3, '.');
        let (Some(s), Some(index), Some(ext)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let (Ok(index), Some((mime, _))) = (
            index.parse::<usize>(),
            FORMATS.iter().find(|(_, e)| *e == ext),
        ) else {
            continue;
        };
        if s != stem {
            continue;
        }
        match std::fs::read(entry.path()) {
            Ok(bytes) => found.push((index, ImagePart::new(*mime, STANDARD.encode(bytes)))),
            Err(e) => {
                tracing::warn!(path = %entry.path().display(), error = %e, "cannot read a resumed turn's image")
            }
        }
    }
    found.sort_by_key(|(index, _)| *index);
    found.into_iter().map(|(_, image)| image).collect()
}

/// Forgets the event's images once its turn has ended.
pub fn remove(home: &HermesHome, inbound: (&str, &str)) {
    let stem = format!("{}.", stem(inbound));
    let Ok(entries) = std::fs::read_dir(dir(home)) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with(&stem) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_round_trip_per_event_and_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let home = HermesHome::at(dir.path());
        let png = ImagePart::new("image/png", STANDARD.encode(b"png-bytes"));
        let jpeg = ImagePart::new("image/jpeg", STANDARD.encode(b"jpeg-bytes"));
        let inbound = ("telegram", "9001:17");
        save(&home, inbound, &[png.clone(), jpeg.clone()]).unwrap();
        save(&home, ("telegram", "other"), std::slice::from_ref(&jpeg)).unwrap();
        assert_eq!(load(&home, inbound), vec![png, jpeg.clone()]);
        remove(&home, inbound);
        assert!(load(&home, inbound).is_empty());
        assert_eq!(load(&home, ("telegram", "other")), vec![jpeg]);
    }
}
