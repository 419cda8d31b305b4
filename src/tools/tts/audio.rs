//! What a speech service answered, turned into mono samples the Opus encoder takes: raw
//! 16-bit PCM (OpenAI `pcm`, ElevenLabs `pcm_24000`) or a WAV file (what local servers
//! usually send). The container is recognised by its first bytes, not by what was asked
//! for, since local servers often ignore the requested format. Compressed answers (MP3, Ogg,
//! FLAC) are refused with a sentence saying so: hermesd asks for uncompressed audio.

/// The sample rates Opus encodes directly (RFC 6716 §2).
pub const OPUS_RATES: &[u32] = &[8_000, 12_000, 16_000, 24_000, 48_000];

/// Mono audio, samples in -1.0..=1.0.
#[derive(Debug, Clone, PartialEq)]
pub struct Pcm {
    pub rate: u32,
    pub samples: Vec<f32>,
}

impl Pcm {
    pub fn duration_secs(&self) -> f32 {
        self.samples.len() as f32 / self.rate as f32
    }
}

/// The container a body's first bytes announce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sniffed {
    Wav,
    Mp3,
    Ogg,
    Flac,
    /// No known header: taken as the raw PCM that was asked for.
    Raw,
}

pub fn sniff(bytes: &[u8]) -> Sniffed {
    match bytes {
        [
            b'R',
            b'I',
            b'F',
            b'F',
            _,
            _,
            _,
            _,
            b'W',
            b'A',
            b'V',
            b'E',
            ..,
        ] => Sniffed::Wav,
        [b'O', b'g', b'g', b'S', ..] => Sniffed::Ogg,
        [b'f', b'L', b'a', b'C', ..] => Sniffed::Flac,
        [b'I', b'D', b'3', ..] => Sniffed::Mp3,
        // An MPEG audio frame sync: eleven set bits.
        [0xFF, second, ..] if second & 0xE0 == 0xE0 => Sniffed::Mp3,
        _ => Sniffed::Raw,
    }
}

/// Why an answer cannot be used; each reads as the end of a sentence.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AudioError {
    #[error(
        "the speech service answered with {0} audio, which hermesd does not decode (it asks for \
         wav or raw pcm; configure the server to honour that)"
    )]
    Compressed(&'static str),
    #[error("the speech service answered with a WAV file hermesd cannot read ({0})")]
    BadWav(String),
    #[error("the speech service answered with no audio")]
    Empty,
}

/// Decodes a body that should be raw s16le mono at `raw_rate` or a WAV file.
pub fn decode(bytes: &[u8], raw_rate: u32) -> Result<Pcm, AudioError> {
    let pcm = match sniff(bytes) {
        Sniffed::Wav => parse_wav(bytes)?,
        Sniffed::Raw => Pcm {
            rate: raw_rate,
            samples: s16le(bytes, 1),
        },
        Sniffed::Mp3 => return Err(AudioError::Compressed("MP3")),
        Sniffed::Ogg => return Err(AudioError::Compressed("Ogg")),
        Sniffed::Flac => return Err(AudioError::Compressed("FLAC")),
    };
    if pcm.samples.is_empty() {
        return Err(AudioError::Empty);
    }
    Ok(pcm)
}

/// Little-endian 16-bit samples, channels averaged to mono; a trailing odd byte is dropped.
fn s16le(bytes: &[u8], channels: usize) -> Vec<f32> {
    let values: Vec<f32> = bytes
        .chunks_exact(2)
        .map(|b| f32::from(i16::from_le_bytes([b[0], b[1]])) / 32768.0)
        .collect();
    mono(values, channels)
}

fn mono(values: Vec<f32>, channels: usize) -> Vec<f32> {
    if channels <= 1 {
        return values;
    }
    values
        .chunks_exact(channels)
        .map(|frame| frame.iter().sum::<f32>() / channels as f32)
        .collect()
}

/// RIFF/WAVE with 16-bit integer or 32-bit float samples (format 1, 3, or the extensible
/// 0xFFFE wrapping either). A data chunk whose size is 0 or 0xFFFFFFFF (streamed WAV, as
/// some servers send it) runs to the end of the body.
pub fn parse_wav(bytes: &[u8]) -> Result<Pcm, AudioError> {
    let bad = |why: &str| AudioError::BadWav(why.to_owned());
    let mut at = 12;
    let mut format: Option<(u16, usize, u32, u16)> = None;
    while at + 8 <= bytes.len() {
        let id = &bytes[at..at + 4];
        let size = u32::from_le_bytes([bytes[at + 4], bytes[at + 5], bytes[at + 6], bytes[at + 7]]);
        let body = at + 8;
        match id {
            b"fmt " => {
                let end = body + size as usize;
                if size < 16 || end > bytes.len() {
                    return Err(bad("short fmt chunk"));
                }
                let f = &bytes[body..end];
                let mut tag = u16::from_le_bytes([f[0], f[1]]);
                let channels = usize::from(u16::from_le_bytes([f[2], f[3]]));
                let rate = u32::from_le_bytes([f[4], f[5], f[6], f[7]]);
                let bits = u16::from_le_bytes([f[14], f[15]]);
                if tag == 0xFFFE && f.len() >= 26 {
                    tag = u16::from_le_bytes([f[24], f[25]]);
                }
                format = Some((tag, channels, rate, bits));
            }
            b"data" => {
                let (tag, channels, rate, bits) = format.ok_or_else(|| bad("data before fmt"))?;
                if channels == 0 || rate == 0 {
                    return Err(bad("no channels or no sample rate"));
                }
                let end = match size {
                    0 | u32::MAX => bytes.len(),
                    n => (body + n as usize).min(bytes.len()),
                };
                let data = &bytes[body..end];
                let samples = match (tag, bits) {
                    (1, 16) => s16le(data, channels),
                    (3, 32) => mono(
                        data.chunks_exact(4)
                            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]).clamp(-1.0, 1.0))
                            .collect(),
                        channels,
                    ),
                    _ => {
                        return Err(AudioError::BadWav(format!(
                            "format {tag} with {bits}-bit samples; 16-bit integer or 32-bit float expected"
                        )));
                    }
                };
                return Ok(Pcm { rate, samples });
            }
            _ => {}
        }
        // Chunks are padded to an even length.
        at = body + size as usize + (size as usize & 1);
    }
    Err(bad("no data chunk"))
}

/// Audio at a rate Opus takes: unchanged when it already is one, else linearly resampled to
/// 48 kHz (speech servers at 22.05 or 44.1 kHz; linear interpolation is plenty for a voice
/// note's bandwidth).
pub fn to_opus_rate(pcm: Pcm) -> Pcm {
    if OPUS_RATES.contains(&pcm.rate) {
        return pcm;
    }
    let target = 48_000u32;
    let ratio = f64::from(pcm.rate) / f64::from(target);
    let out_len = (pcm.samples.len() as f64 / ratio).floor() as usize;
    let last = pcm.samples.len().saturating_sub(1);
    let samples = (0..out_len)
        .map(|i| {
            let pos = i as f64 * ratio;
            let left = (pos.floor() as usize).min(last);
            let right = (left + 1).min(last);
            let frac = (pos - left as f64) as f32;
            pcm.samples[left] * (1.0 - frac) + pcm.samples[right] * frac
        })
        .collect();
    Pcm {
        rate: target,
        samples,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A WAV file of `samples` (16-bit, `channels` interleaved) at `rate`.
    pub(crate) fn wav(samples: &[i16], channels: u16, rate: u32) -> Vec<u8> {
        let data_len = (samples.len() * 2) as u32;
        let mut out = Vec::new();
        out.extend_from_slice(b"RIFF");
        out.extend_from_slice(&(36 + data_len).to_le_bytes());
        out.extend_from_slice(b"WAVEfmt ");
        out.extend_from_slice(&16u32.to_le_bytes());
        out.extend_from_slice(&1u16.to_le_bytes());
        out.extend_from_slice(&channels.to_le_bytes());
        out.extend_from_slice(&rate.to_le_bytes());
        out.extend_from_slice(&(rate * u32::from(channels) * 2).to_le_bytes());
        out.extend_from_slice(&(channels * 2).to_le_bytes());
        out.extend_from_slice(&16u16.to_le_bytes());
        // An extra chunk before the data, as ffmpeg writes (LIST), odd-sized to test padding.
        out.extend_from_slice(b"LIST");
        out.extend_from_slice(&3u32.to_le_bytes());
        out.extend_from_slice(&[1, 2, 3, 0]);
        out.extend_from_slice(b"data");
        out.extend_from_slice(&data_len.to_le_bytes());
        for s in samples {
            out.extend_from_slice(&s.to_le_bytes());
        }
        out
    }

    #[test]
    fn containers_are_recognised_by_their_first_bytes() {
        assert_eq!(sniff(&wav(&[0], 1, 24_000)), Sniffed::Wav);
        assert_eq!(sniff(b"ID3\x04rest"), Sniffed::Mp3);
        assert_eq!(sniff(&[0xFF, 0xFB, 0x90, 0x64]), Sniffed::Mp3);
        assert_eq!(sniff(b"OggS\0\x02"), Sniffed::Ogg);
        assert_eq!(sniff(b"fLaC\0"), Sniffed::Flac);
        assert_eq!(sniff(&[0x10, 0x00, 0xF0, 0xFF]), Sniffed::Raw);
        assert_eq!(
            decode(b"ID3\x04\0\0", 24_000),
            Err(AudioError::Compressed("MP3"))
        );
        assert_eq!(decode(b"", 24_000), Err(AudioError::Empty));
    }

    #[test]
    fn raw_pcm_and_wav_decode_to_the_same_samples() {
        let samples: Vec<i16> = vec![0, 16384, -16384, 32767, -32768];
        let raw: Vec<u8> = samples.iter().flat_map(|s| s.to_le_bytes()).collect();
        let from_raw = decode(&raw, 24_000).unwrap();
        let from_wav = decode(&wav(&samples, 1, 24_000), 8_000).unwrap();
        assert_eq!(from_raw, from_wav);
        assert_eq!(from_raw.samples[1], 0.5);
        assert_eq!(from_raw.samples[4], -1.0);
    }

    #[test]
    fn stereo_wav_is_averaged_to_mono_and_odd_rates_resampled() {
        let pcm = parse_wav(&wav(&[1000, 3000, -2000, 0], 2, 22_050)).unwrap();
        assert_eq!(pcm.samples.len(), 2);
        assert!((pcm.samples[0] - 2000.0 / 32768.0).abs() < 1e-6);
        let long = Pcm {
            rate: 22_050,
            samples: vec![0.25; 22_050],
        };
        let resampled = to_opus_rate(long);
        assert_eq!(resampled.rate, 48_000);
        assert_eq!(resampled.samples.len(), 48_000);
        assert!(resampled.samples.iter().all(|s| (s - 0.25).abs() < 1e-6));
        let kept = to_opus_rate(Pcm {
            rate: 24_000,
            samples: vec![0.1; 10],
        });
        assert_eq!(kept.samples.len(), 10);
    }

    #[test]
    fn a_wav_without_data_or_with_8_bit_samples_is_refused() {
        let mut header = wav(&[], 1, 24_000);
        header.truncate(36);
        assert!(matches!(parse_wav(&header), Err(AudioError::BadWav(_))));
        let mut eight_bit = wav(&[0, 0], 1, 8_000);
        eight_bit[34] = 8;
        let err = parse_wav(&eight_bit).unwrap_err().to_string();
        assert!(err.contains("8-bit"), "{err}");
    }
}
