//! Speech benchmark (issue 32): how long hermesd's own Ogg/Opus encoding takes per 100
//! characters of reply, in process. The input is what a provider returns for 100 characters:
//! 24 kHz 16-bit mono PCM (OpenAI `pcm`, ElevenLabs `pcm_24000`) of about 6 s of speech (a
//! speaker's ~16 characters per second), here a tone with speech-like loudness changes. Each
//! sample decodes the bytes, encodes them (mono, 20 ms frames, 32 kb/s VBR) and measures the
//! waveform, as a spoken reply does; `probe` (what delivery does before a voice send) is timed
//! separately. Prints one JSON report (also `target/bench-speech.json`). `-- --quick`: fewer
//! samples.

use std::time::Instant;

use hermesd::tools::tts::{audio, opus};
use serde_json::json;

/// Seconds of speech a provider returns for 100 characters.
const SECONDS_PER_100_CHARS: f64 = 6.0;
const RATE: u32 = 24_000;

/// 24 kHz s16le PCM: a 180 Hz voice-like tone with syllable-rate loudness (4 Hz).
fn provider_pcm(seconds: f64) -> Vec<u8> {
    let n = (seconds * f64::from(RATE)) as usize;
    (0..n)
        .map(|i| {
            let t = i as f64 / f64::from(RATE);
            let envelope = 0.5 + 0.5 * (2.0 * std::f64::consts::PI * 4.0 * t).sin().abs();
            let voice = (2.0 * std::f64::consts::PI * 180.0 * t).sin()
                + 0.3 * (2.0 * std::f64::consts::PI * 540.0 * t).sin();
            ((0.4 * envelope * voice).clamp(-1.0, 1.0) * 32767.0) as i16
        })
        .flat_map(i16::to_le_bytes)
        .collect()
}

fn percentiles(mut samples: Vec<f64>) -> serde_json::Value {
    samples.sort_by(f64::total_cmp);
    let pick = |p: f64| samples[((samples.len() as f64 * p) as usize).min(samples.len() - 1)];
    let round = |ms: f64| (ms * 1000.0).round() / 1000.0;
    json!({"p50_ms": round(pick(0.5)), "p99_ms": round(pick(0.99)), "n": samples.len()})
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let runs = if quick { 5 } else { 40 };
    let pcm = provider_pcm(SECONDS_PER_100_CHARS);
    let mut encode = Vec::new();
    let mut probe = Vec::new();
    let mut ogg_bytes = 0;
    for _ in 0..runs {
        let started = Instant::now();
        let decoded = audio::decode(&pcm, RATE).expect("decode");
        let encoded = opus::encode(decoded).expect("encode");
        encode.push(started.elapsed().as_secs_f64() * 1000.0);
        let started = Instant::now();
        let probed = opus::probe(&encoded.ogg).expect("probe");
        probe.push(started.elapsed().as_secs_f64() * 1000.0);
        assert!((probed.duration_secs as f64 - SECONDS_PER_100_CHARS).abs() < 0.01);
        ogg_bytes = encoded.ogg.len();
    }
    let report = json!({
        "bench": "speech",
        "quick": quick,
        "input": {"characters": 100, "seconds": SECONDS_PER_100_CHARS, "rate_hz": RATE,
                  "pcm_bytes": pcm.len()},
        "encode_per_100_chars": percentiles(encode),
        "probe_per_100_chars": percentiles(probe),
        "ogg_bytes_per_100_chars": ogg_bytes,
    });
    let text = serde_json::to_string_pretty(&report).unwrap();
    println!("{text}");
    let _ = std::fs::write(
        concat!(env!("CARGO_MANIFEST_DIR"), "/target/bench-speech.json"),
        &text,
    );
}
