//! Ogg/Opus voice notes, made and checked in-process with `opus-pure` (pure Rust; no libopus,
//! no ffmpeg on the host). This module is the crate's only user, so a change of encoder
//! stays here. Encoding follows RFC 7845: mono, 20 ms frames, the header's pre-skip from the
//! encoder's real delay, the encoder flushed with silence and the last granule set to the
//! end of the speech, so players neither cut the tail nor add padding.
//!
//! [`probe`] reads a clip back (the delivery step checks every file it is about to send as a
//! voice bubble): its length from the decoded audio and the amplitude outline Discord shows.

use std::io::Cursor;

use opus_pure::{
    Application, MAX_PACKET_BYTES, MAX_PACKET_SAMPLES, OggOpusReader, OggOpusWriter, OpusEncoder,
    OpusHead, Trim,
};

use super::audio::{Pcm, to_opus_rate};

/// Speech needs little: 32 kb/s VBR is clear for a single voice.
const BITRATE_BPS: i32 = 32_000;
/// Discord's voice messages carry at most 256 amplitude bytes.
pub const MAX_WAVEFORM_BYTES: usize = 256;
/// Rate [`probe`] decodes at: enough to measure loudness, cheap to decode.
const PROBE_RATE: i32 = 8_000;

/// An encoded voice note.
#[derive(Debug, Clone, PartialEq)]
pub struct Encoded {
    pub ogg: Vec<u8>,
    pub duration_secs: f32,
    /// One byte (0–255) per slice of at least 100 ms, at most [`MAX_WAVEFORM_BYTES`].
    pub waveform: Vec<u8>,
}

/// What [`probe`] found in a file.
#[derive(Debug, Clone, PartialEq)]
pub struct Probe {
    pub duration_secs: f32,
    pub waveform: Vec<u8>,
}

#[derive(Debug, thiserror::Error)]
pub enum OpusError {
    #[error("cannot encode the speech as Opus ({0})")]
    Encode(String),
    #[error("the file is not an Ogg/Opus voice note ({0})")]
    NotOpus(String),
}

fn encode_err(e: opus_pure::Error) -> OpusError {
    OpusError::Encode(e.to_string())
}

/// Encodes mono `pcm` (any rate; non-Opus rates are resampled) into an Ogg/Opus file.
pub fn encode(pcm: Pcm) -> Result<Encoded, OpusError> {
    let pcm = to_opus_rate(pcm);
    let rate = pcm.rate as i32;
    let frame = (rate / 50) as usize;
    let mut encoder = OpusEncoder::new(rate, 1, Application::Voip).map_err(encode_err)?;
    encoder.bitrate_bps = BITRATE_BPS;
    let head = OpusHead::for_encoder(&encoder, pcm.rate);
    let ticks = 48_000 / rate as usize;
    let total = pcm.samples.len();
    // Silence after the speech flushes the encoder's look-ahead; the last granule then says
    // where the speech ended (RFC 7845 §4.4).
    let frames = (total + usize::from(head.pre_skip).div_ceil(ticks))
        .div_ceil(frame)
        .max(1);
    let final_granule = u64::from(head.pre_skip) + (total * ticks) as u64;
    let mut writer = OggOpusWriter::new(Vec::new(), head).map_err(encode_err)?;
    let mut packet = vec![0u8; MAX_PACKET_BYTES];
    let mut block = vec![0.0f32; frame];
    for i in 0..frames {
        let start = (i * frame).min(total);
        let end = (start + frame).min(total);
        block[..end - start].copy_from_slice(&pcm.samples[start..end]);
        block[end - start..].fill(0.0);
        let n = encoder
            .encode(&block, frame, &mut packet)
            .map_err(encode_err)?;
        if i + 1 == frames {
            let written = u64::try_from(writer.granule()).unwrap_or(0);
            let duration = final_granule.saturating_sub(written);
            writer
                .write_packet_with_duration(&packet[..n], duration as u32)
                .map_err(encode_err)?;
        } else {
            writer.write_packet(&packet[..n]).map_err(encode_err)?;
        }
    }
    let ogg = writer.finish().map_err(encode_err)?;
    Ok(Encoded {
        ogg,
        duration_secs: pcm.duration_secs(),
        waveform: waveform(&pcm.samples, pcm.rate),
    })
}

/// The loudness outline: the peak of each slice, scaled to 0–255. Slices are at least
/// 100 ms long and at most 256 of them cover the clip.
pub fn waveform(samples: &[f32], rate: u32) -> Vec<u8> {
    if samples.is_empty() {
        return vec![0];
    }
    let min_slice = (rate as usize / 10).max(1);
    let slices = (samples.len() / min_slice).clamp(1, MAX_WAVEFORM_BYTES);
    let slice = samples.len().div_ceil(slices);
    samples
        .chunks(slice)
        .map(|chunk| {
            let peak = chunk.iter().fold(0.0f32, |m, s| m.max(s.abs())).min(1.0);
            (peak * 255.0).round() as u8
        })
        .collect()
}

/// Reads an Ogg/Opus file through: its headers, every packet, the audio's length after the
/// pre-skip and end trim, and its waveform. Anything else is [`OpusError::NotOpus`].
pub fn probe(bytes: &[u8]) -> Result<Probe, OpusError> {
    let not = |e: opus_pure::Error| OpusError::NotOpus(e.to_string());
    let mut reader = OggOpusReader::new(Cursor::new(bytes)).map_err(not)?;
    let channels = usize::from(reader.head().channel_count);
    let mut decoder = reader.head().decoder(PROBE_RATE).map_err(not)?;
    let mut trim = Trim::new(reader.head(), PROBE_RATE, channels).map_err(not)?;
    let mut block = vec![0.0f32; MAX_PACKET_SAMPLES * channels];
    let mut mono = Vec::new();
    for packet in reader.packets() {
        let packet = packet.map_err(not)?;
        let n = decoder
            .decode(&packet.data, MAX_PACKET_SAMPLES, &mut block)
            .map_err(not)?;
        let kept = trim.keep(&packet, &block[..n * channels]);
        mono.extend(
            kept.chunks_exact(channels)
                .map(|f| f.iter().sum::<f32>() / channels as f32),
        );
    }
    if mono.is_empty() {
        return Err(OpusError::NotOpus("no audio".to_owned()));
    }
    Ok(Probe {
        duration_secs: mono.len() as f32 / PROBE_RATE as f32,
        waveform: waveform(&mono, PROBE_RATE as u32),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 440 Hz tone that swells, `secs` long at `rate`.
    pub(crate) fn tone(secs: f32, rate: u32) -> Pcm {
        let n = (secs * rate as f32) as usize;
        let samples = (0..n)
            .map(|i| {
                let t = i as f32 / rate as f32;
                0.5 * (t / secs) * (2.0 * std::f32::consts::PI * 440.0 * t).sin()
            })
            .collect();
        Pcm { rate, samples }
    }

    #[test]
    fn encoded_speech_reads_back_with_its_length_and_outline() {
        let pcm = tone(2.37, 24_000);
        let encoded = encode(pcm.clone()).unwrap();
        assert_eq!(&encoded.ogg[..4], b"OggS");
        assert!((encoded.duration_secs - 2.37).abs() < 0.001);
        // Gapless: the trimmed decode has exactly the input's length (at 8 kHz, one sample
        // in three of 24 kHz), not a frame more or less.
        let probed = probe(&encoded.ogg).unwrap();
        assert!(
            (probed.duration_secs - 2.37).abs() <= 1.0 / 8_000.0 * 2.0,
            "{}",
            probed.duration_secs
        );
        assert_eq!(encoded.waveform.len(), 23);
        assert_eq!(probed.waveform.len(), 23);
        // The tone swells: the outline rises from near silence to loud.
        assert!(probed.waveform[0] < 40, "{:?}", probed.waveform);
        assert!(probed.waveform[22] > 90, "{:?}", probed.waveform);
    }

    #[test]
    fn odd_rates_are_resampled_and_long_clips_keep_256_waveform_bytes() {
        let encoded = encode(tone(30.0, 22_050)).unwrap();
        assert!((encoded.duration_secs - 30.0).abs() < 0.01);
        assert_eq!(encoded.waveform.len(), MAX_WAVEFORM_BYTES);
        let probed = probe(&encoded.ogg).unwrap();
        assert!((probed.duration_secs - 30.0).abs() < 0.01);
        assert_eq!(probed.waveform.len(), MAX_WAVEFORM_BYTES);
    }

    #[test]
    fn a_very_short_clip_still_makes_a_valid_file() {
        let encoded = encode(Pcm {
            rate: 48_000,
            samples: vec![0.2; 10],
        })
        .unwrap();
        let probed = probe(&encoded.ogg).unwrap();
        assert!(probed.duration_secs > 0.0 && probed.duration_secs < 0.01);
        assert_eq!(probed.waveform.len(), 1);
    }

    #[test]
    fn other_files_are_not_voice_notes() {
        for bytes in [&b"ID3\x04 an mp3"[..], b"", b"OggS\0\x02garbage"] {
            assert!(matches!(probe(bytes), Err(OpusError::NotOpus(_))));
        }
    }
}
