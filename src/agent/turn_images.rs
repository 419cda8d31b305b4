//! The image parts of a journaled gateway turn, kept from the moment the turn starts until it
//! ends. state.db rows keep text only (the Python Hermes reads them), so a turn resumed after
//! a crash reads its photos back from here and sends the same image parts the first attempt
//! did. One instance keeps them as files under the home (`cache/turn_images/`); instances
//! sharing PostgreSQL keep them as shared files under the same names (`turn_images/...`), so
//! the instance that resumes a turn another one started finds its photos. A turn's images
//! are at most `MAX_TURN_IMAGES_BASE64`; shared ones a crashed turn never forgot are removed
//! after [`SHARED_TTL`].

use std::path::PathBuf;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use sha2::{Digest, Sha256};

use super::message::ImagePart;
use crate::coord::SharedFiles;
use crate::home::HermesHome;

/// How long shared images of a turn that never ended are kept (a journaled turn is resumed
/// or abandoned well within it).
pub const SHARED_TTL: Duration = Duration::from_secs(24 * 3600);

/// The shared files' folder for turn images.
const SHARED_DIR: &str = "turn_images/";

/// Where a turn's images are kept.
#[derive(Debug, Clone)]
pub enum TurnImages {
    /// Files under one home.
    Home(HermesHome),
    /// Shared files every instance on the database sees.
    Shared(SharedFiles),
}

impl TurnImages {
    /// Keeps `images` for the event's turn.
    pub fn save(&self, inbound: (&str, &str), images: &[ImagePart]) -> std::io::Result<()> {
        match self {
            TurnImages::Home(home) => save(home, inbound, images),
            TurnImages::Shared(shared) => {
                // Whatever a crashed turn left behind long ago goes first.
                shared.remove(SHARED_DIR, Some(SHARED_TTL))?;
                for (name, bytes) in encoded(inbound, images)? {
                    shared.write(&format!("{SHARED_DIR}{name}"), &bytes)?;
                }
                Ok(())
            }
        }
    }

    /// The images kept for the event's turn, in their original order.
    pub fn load(&self, inbound: (&str, &str)) -> Vec<ImagePart> {
        match self {
            TurnImages::Home(home) => load(home, inbound),
            TurnImages::Shared(shared) => {
                let prefix = format!("{SHARED_DIR}{}.", stem(inbound));
                let names = shared.list(&prefix).unwrap_or_else(|e| {
                    tracing::warn!(error = %e, "cannot list a resumed turn's shared images");
                    Vec::new()
                });
                let read = names.iter().filter_map(|name| {
                    let file = name.strip_prefix(SHARED_DIR)?;
                    match shared.read(name) {
                        Ok(Some((bytes, _))) => Some((file.to_owned(), bytes)),
                        Ok(None) => None,
                        Err(e) => {
                            tracing::warn!(name, error = %e, "cannot read a resumed turn's image");
                            None
                        }
                    }
                });
                decoded(&stem(inbound), read)
            }
        }
    }

    /// Forgets the event's images once its turn has ended.
    pub fn remove(&self, inbound: (&str, &str)) {
        match self {
            TurnImages::Home(home) => remove(home, inbound),
            TurnImages::Shared(shared) => {
                let prefix = format!("{SHARED_DIR}{}.", stem(inbound));
                if let Err(e) = shared.remove(&prefix, None) {
                    tracing::warn!(error = %e, "cannot forget a turn's shared images");
                }
            }
        }
    }
}

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
fn save(home: &HermesHome, inbound: (&str, &str), images: &[ImagePart]) -> std::io::Result<()> {
    if images.is_empty() {
        return Ok(());
    }
    let dir = dir(home);
    crate::home::private::create_dir_all(&dir)?;
    for (name, bytes) in encoded(inbound, images)? {
        let path = dir.join(&name);
        let partial = dir.join(format!("{name}.partial"));
        crate::home::private::write(&partial, &bytes)?;
        std::fs::rename(&partial, &path)?;
    }
    Ok(())
}

/// Each image's name (`<stem>.<index>.<ext>`) and bytes; formats an image part cannot hold
/// are left out.
fn encoded(inbound: (&str, &str), images: &[ImagePart]) -> std::io::Result<Vec<(String, Vec<u8>)>> {
    let stem = stem(inbound);
    let mut out = Vec::new();
    for (index, image) in images.iter().enumerate() {
        let Some((_, ext)) = FORMATS.iter().find(|(mime, _)| *mime == image.media_type()) else {
            continue;
        };
        let bytes = STANDARD
            .decode(image.base64())
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        out.push((format!("{stem}.{index}.{ext}"), bytes));
    }
    Ok(out)
}

/// The images among `files` (name, bytes) that belong to `stem`, in their original order.
fn decoded(stem: &str, files: impl Iterator<Item = (String, Vec<u8>)>) -> Vec<ImagePart> {
    let mut found: Vec<(usize, ImagePart)> = Vec::new();
    for (name, bytes) in files {
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
        if s == stem {
            found.push((index, ImagePart::new(*mime, STANDARD.encode(bytes))));
        }
    }
    found.sort_by_key(|(index, _)| *index);
    found.into_iter().map(|(_, image)| image).collect()
}

fn load(home: &HermesHome, inbound: (&str, &str)) -> Vec<ImagePart> {
    let stem = stem(inbound);
    let Ok(entries) = std::fs::read_dir(dir(home)) else {
        return Vec::new();
    };
    let files = entries.flatten().filter_map(|entry| {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with(&format!("{stem}.")) || name.ends_with(".partial") {
            return None;
        }
        match std::fs::read(entry.path()) {
            Ok(bytes) => Some((name, bytes)),
            Err(e) => {
                tracing::warn!(path = %entry.path().display(), error = %e, "cannot read a resumed turn's image");
                None
            }
        }
    });
    decoded(&stem, files)
}

fn remove(home: &HermesHome, inbound: (&str, &str)) {
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
