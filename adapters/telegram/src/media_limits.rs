//! What Telegram accepts as an upload, checked before sending: photos over 10 MB, over
//! 10000 px in width plus height, or with a side ratio over 20 are refused by sendPhoto
//! (https://core.telegram.org/bots/api#sendphoto), so they go as documents; any file over
//! 50 MB (2000 MB on a local Bot API server, https://core.telegram.org/bots/api#sending-files
//! and #using-a-local-bot-api-server) is refused before upload.

const MB: u64 = 1024 * 1024;
const PHOTO_MAX_BYTES: u64 = 10 * MB;
const PHOTO_MAX_SIDES: u64 = 10_000;
const PHOTO_MAX_RATIO: u64 = 20;
const CLOUD_UPLOAD_MAX: u64 = 50 * MB;
const LOCAL_UPLOAD_MAX: u64 = 2000 * MB;

/// How to send a file, or why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Upload {
    /// The Bot API method and its file field.
    Send(&'static str, &'static str),
    /// Telegram would refuse it; the reason is for the user.
    Refuse(String),
}

/// Adjusts `native` (the method the extension calls for) to what Telegram accepts.
pub fn check(native: (&'static str, &'static str), bytes: &[u8], local_mode: bool) -> Upload {
    let size = bytes.len() as u64;
    let cap = if local_mode {
        LOCAL_UPLOAD_MAX
    } else {
        CLOUD_UPLOAD_MAX
    };
    if size > cap {
        return Upload::Refuse(format!(
            "it is {} MB and Telegram bots can send at most {} MB",
            size.div_ceil(MB),
            cap / MB
        ));
    }
    if native.0 == "sendPhoto" && !photo_acceptable(bytes) {
        return Upload::Send("sendDocument", "document");
    }
    Upload::Send(native.0, native.1)
}

fn photo_acceptable(bytes: &[u8]) -> bool {
    if bytes.len() as u64 > PHOTO_MAX_BYTES {
        return false;
    }
    match dimensions(bytes) {
        Some((w, h)) if w > 0 && h > 0 => {
            let (w, h) = (u64::from(w), u64::from(h));
            w + h <= PHOTO_MAX_SIDES && w.max(h) <= h.min(w) * PHOTO_MAX_RATIO
        }
        // Unknown format: let Telegram judge it as a photo.
        _ => true,
    }
}

/// Width and height from a PNG or JPEG header.
fn dimensions(bytes: &[u8]) -> Option<(u32, u32)> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        let w = u32::from_be_bytes(bytes.get(16..20)?.try_into().ok()?);
        let h = u32::from_be_bytes(bytes.get(20..24)?.try_into().ok()?);
        return Some((w, h));
    }
    if bytes.starts_with(&[0xFF, 0xD8]) {
        return jpeg_dimensions(bytes);
    }
    None
}

/// Walks the JPEG segments to the first start-of-frame marker.
fn jpeg_dimensions(bytes: &[u8]) -> Option<(u32, u32)> {
    let mut i = 2;
    while i + 9 < bytes.len() {
        if bytes[i] != 0xFF {
            return None;
        }
        let marker = bytes[i + 1];
        let length = usize::from(u16::from_be_bytes([bytes[i + 2], bytes[i + 3]]));
        let start_of_frame = matches!(marker, 0xC0..=0xCF) && !matches!(marker, 0xC4 | 0xC8 | 0xCC);
        if start_of_frame {
            let h = u16::from_be_bytes([bytes[i + 5], bytes[i + 6]]);
            let w = u16::from_be_bytes([bytes[i + 7], bytes[i + 8]]);
            return Some((u32::from(w), u32::from(h)));
        }
        i += 2 + length;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(width: u32, height: u32) -> Vec<u8> {
        let mut bytes = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
        bytes.extend(width.to_be_bytes());
        bytes.extend(height.to_be_bytes());
        bytes
    }

    fn jpeg(width: u16, height: u16) -> Vec<u8> {
        let mut bytes = vec![0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, 0, 0];
        bytes.extend([0xFF, 0xC0, 0x00, 0x11, 0x08]);
        bytes.extend(height.to_be_bytes());
        bytes.extend(width.to_be_bytes());
        bytes.extend([0; 8]);
        bytes
    }

    const PHOTO: (&str, &str) = ("sendPhoto", "photo");

    #[test]
    fn photos_telegram_would_refuse_go_as_documents() {
        assert_eq!(
            check(PHOTO, &png(800, 600), false),
            Upload::Send("sendPhoto", "photo")
        );
        assert_eq!(
            check(PHOTO, &jpeg(800, 600), false),
            Upload::Send("sendPhoto", "photo")
        );
        let document = Upload::Send("sendDocument", "document");
        assert_eq!(check(PHOTO, &png(4000, 100), false), document, "ratio 40");
        assert_eq!(check(PHOTO, &jpeg(100, 2100), false), document, "ratio 21");
        assert_eq!(
            check(PHOTO, &png(6000, 5000), false),
            document,
            "sides over 10000"
        );
        let mut big = png(800, 600);
        big.resize(11 * MB as usize, 0);
        assert_eq!(check(PHOTO, &big, false), document, "over 10 MB");
    }

    #[test]
    fn files_over_the_upload_cap_are_refused() {
        let big = vec![0u8; 51 * MB as usize];
        let refused = check(("sendDocument", "document"), &big, false);
        assert!(
            matches!(&refused, Upload::Refuse(r) if r.contains("50 MB")),
            "{refused:?}"
        );
        assert_eq!(
            check(("sendDocument", "document"), &big, true),
            Upload::Send("sendDocument", "document"),
            "a local Bot API server takes up to 2000 MB"
        );
    }
}
