//! What kind of audio an upload is, judged from its bytes the way Telegram's voice rule needs:
//! sendVoice takes "an .OGG file encoded with OPUS, or in .MP3 format, or in .M4A format"
//! (https://core.telegram.org/bots/api#sendvoice); anything else is not shown as a voice
//! bubble (Telegram sends it as a document). An Ogg/Opus file is recognised by its pages
//! (RFC 3533 §6: capture pattern `OggS`, version 0, segment table) whose first packet is
//! `OpusHead` (RFC 7845 §5.1: version 1, 1–255 channels) and whose second is `OpusTags`
//! (§5.2), with a positive granule position on the last page. This parser is independent of
//! hermesd's encoder on purpose.

use serde_json::{Map, Value};

use crate::state::{UploadedFile, param_i64};

/// The message field a send shows its file as, and for a voice bubble its mime type and
/// duration. https://core.telegram.org/bots/api#sendvoice: a voice bubble only for Ogg/Opus,
/// MP3 or M4A; other audio "may be sent as Audio or Document". The fake answers a document,
/// so a test sees that no bubble was shown.
pub(crate) fn shown_as<'a>(
    field: &'a str,
    params: &Map<String, Value>,
    files: &[UploadedFile],
) -> (&'a str, Option<(&'static str, i64)>) {
    if field != "voice" {
        return (field, None);
    }
    let format = files
        .iter()
        .find(|f| f.field == "voice")
        .map_or("other", |f| f.audio_format);
    let mime = match format {
        "ogg_opus" => "audio/ogg",
        "mp3" => "audio/mpeg",
        "m4a" => "audio/mp4",
        _ => return ("document", None),
    };
    let duration = params.get("duration").and_then(param_i64).unwrap_or(0);
    (field, Some((mime, duration)))
}

/// `ogg_opus`, `mp3`, `m4a` or `other`.
pub fn classify(bytes: &[u8]) -> &'static str {
    if is_ogg_opus(bytes) {
        "ogg_opus"
    } else if bytes.starts_with(b"ID3")
        || (bytes.len() > 1 && bytes[0] == 0xFF && bytes[1] & 0xE0 == 0xE0)
    {
        "mp3"
    } else if bytes.len() > 8 && &bytes[4..8] == b"ftyp" {
        "m4a"
    } else {
        "other"
    }
}

/// The packets of the first logical stream and the last page's granule position.
fn packets(bytes: &[u8]) -> Option<(Vec<Vec<u8>>, i64)> {
    let mut at = 0;
    let mut packets = Vec::new();
    let mut current = Vec::new();
    let mut granule = -1;
    while at < bytes.len() {
        let header = bytes.get(at..at + 27)?;
        if &header[..4] != b"OggS" || header[4] != 0 {
            return None;
        }
        granule = i64::from_le_bytes(header[6..14].try_into().ok()?);
        let segments = usize::from(header[26]);
        let table = bytes.get(at + 27..at + 27 + segments)?;
        let mut body = at + 27 + segments;
        for &lace in table {
            let lace = usize::from(lace);
            current.extend_from_slice(bytes.get(body..body + lace)?);
            body += lace;
            if lace < 255 {
                packets.push(std::mem::take(&mut current));
            }
        }
        at = body;
    }
    Some((packets, granule))
}

fn is_ogg_opus(bytes: &[u8]) -> bool {
    let Some((packets, granule)) = packets(bytes) else {
        return false;
    };
    let head_ok = packets
        .first()
        .is_some_and(|p| p.len() >= 19 && p.starts_with(b"OpusHead") && p[8] == 1 && p[9] >= 1);
    let tags_ok = packets.get(1).is_some_and(|p| p.starts_with(b"OpusTags"));
    head_ok && tags_ok && packets.len() > 2 && granule > 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(granule: i64, packets: &[&[u8]]) -> Vec<u8> {
        let mut table = Vec::new();
        let mut body = Vec::new();
        for p in packets {
            let mut left = p.len();
            while left >= 255 {
                table.push(255);
                left -= 255;
            }
            table.push(left as u8);
            body.extend_from_slice(p);
        }
        let mut out = b"OggS\0\0".to_vec();
        out.extend_from_slice(&granule.to_le_bytes());
        out.extend_from_slice(&[0; 12]);
        out.push(table.len() as u8);
        out.extend_from_slice(&table);
        out.extend_from_slice(&body);
        out
    }

    #[test]
    fn only_ogg_with_opus_headers_and_audio_is_a_voice_note() {
        let head = b"OpusHead\x01\x01\x38\x01\x80\xbb\0\0\0\0\0";
        let mut good = page(0, &[head]);
        good.extend(page(0, &[b"OpusTagsxxxx"]));
        good.extend(page(960, &[&[0xf8; 300]]));
        assert_eq!(classify(&good), "ogg_opus");

        let mut vorbis = page(0, &[b"\x01vorbis"]);
        vorbis.extend(page(960, &[b"x"]));
        assert_eq!(classify(&vorbis), "other");
        let mut no_audio = page(0, &[head]);
        no_audio.extend(page(0, &[b"OpusTags"]));
        assert_eq!(classify(&no_audio), "other");
        assert_eq!(classify(b"ID3\x04"), "mp3");
        assert_eq!(classify(b"\0\0\0\x20ftypM4A "), "m4a");
        assert_eq!(classify(b"RIFF....WAVE"), "other");
    }
}
