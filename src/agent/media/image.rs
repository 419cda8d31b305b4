//! A photo from a chat made ready for a vision model: PNG, JPEG, GIF and WebP within the cap
//! go as they are; anything larger, wider than the APIs take, or in another format (BMP,
//! a PNG-named TIFF) is decoded and re-encoded as JPEG, scaled down until it fits.
//!
//! The cap is Anthropic's, the strictest of the three APIs: 5 MB per image
//! (https://docs.anthropic.com/en/docs/build-with-claude/vision, "Image size limits"), and
//! images over 8000 px on a side are refused. The cap applies to the base64 text, so the
//! raw bytes may be at most 3/4 of it. OpenAI takes up to 50 MB per request and scales
//! images down itself, so meeting Anthropic's limits suits every mode.

use std::io::Cursor;
use std::path::Path;

use base64::Engine;
use image::{DynamicImage, ImageFormat, ImageReader, Limits};

use crate::agent::message::ImagePart;

/// Largest base64 image we send (Anthropic's 5 MB).
pub const MAX_BASE64_BYTES: usize = 5 * 1024 * 1024;
/// Largest raw image whose base64 stays within [`MAX_BASE64_BYTES`].
pub const MAX_RAW_BYTES: usize = MAX_BASE64_BYTES / 4 * 3;
/// Longest side the APIs accept.
const MAX_EDGE: u32 = 8000;
/// Longest side after a re-encode: OpenAI's high-detail tiling and Anthropic both scale
/// larger images down before the model sees them, so more pixels only cost upload time.
const TARGET_EDGE: u32 = 2048;
/// Files larger than this are not decoded at all (a decompression bomb or a raw scan).
const MAX_INPUT_BYTES: u64 = 64 * 1024 * 1024;

/// Why a photo cannot be shown to the model.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("cannot read the image: {0}")]
    Read(#[from] std::io::Error),
    #[error("the image is {0} bytes, too large to process")]
    TooLarge(u64),
    #[error("not an image hermesd can read: {0}")]
    Decode(#[from] image::ImageError),
    #[error("the image could not be made small enough")]
    Unshrinkable,
}

/// Reads `path` and returns it as an image part within the limits (blocking: decoding
/// and encoding are CPU work; call it on the blocking pool).
pub fn load(path: &Path) -> Result<ImagePart, ImageError> {
    let size = std::fs::metadata(path)?.len();
    if size > MAX_INPUT_BYTES {
        return Err(ImageError::TooLarge(size));
    }
    let bytes = std::fs::read(path)?;
    prepare(&bytes)
}

/// [`load`] on bytes already in memory.
pub fn prepare(bytes: &[u8]) -> Result<ImagePart, ImageError> {
    let format = image::guess_format(bytes).ok();
    let sendable = format.and_then(media_type);
    if let Some(media_type) = sendable
        && bytes.len() <= MAX_RAW_BYTES
        && fits_on_edge(bytes, format)
    {
        return Ok(part(media_type, bytes));
    }
    let mut reader = ImageReader::new(Cursor::new(bytes)).with_guessed_format()?;
    let mut limits = Limits::default();
    limits.max_image_width = Some(40_000);
    limits.max_image_height = Some(40_000);
    limits.max_alloc = Some(512 * 1024 * 1024);
    reader.limits(limits);
    let decoded = reader.decode()?;
    reencode(&decoded)
}

/// Scales `image` down to [`TARGET_EDGE`] (then smaller, and at lower quality) until its
/// JPEG fits the cap.
fn reencode(image: &DynamicImage) -> Result<ImagePart, ImageError> {
    let mut edge = TARGET_EDGE.min(image.width().max(image.height()));
    for quality in [85u8, 75, 60, 45] {
        let scaled = if image.width().max(image.height()) > edge {
            image.thumbnail(edge, edge)
        } else {
            image.clone()
        };
        // JPEG has no alpha channel: flatten to RGB first.
        let rgb = DynamicImage::ImageRgb8(scaled.to_rgb8());
        let mut out = Vec::new();
        let encoder =
            image::codecs::jpeg::JpegEncoder::new_with_quality(Cursor::new(&mut out), quality);
        rgb.write_with_encoder(encoder)?;
        if out.len() <= MAX_RAW_BYTES {
            return Ok(part("image/jpeg", &out));
        }
        edge = edge * 3 / 4;
    }
    Err(ImageError::Unshrinkable)
}

fn part(media_type: &str, bytes: &[u8]) -> ImagePart {
    ImagePart::new(
        media_type,
        base64::engine::general_purpose::STANDARD.encode(bytes),
    )
}

/// The formats every vision API takes as they are.
fn media_type(format: ImageFormat) -> Option<&'static str> {
    match format {
        ImageFormat::Png => Some("image/png"),
        ImageFormat::Jpeg => Some("image/jpeg"),
        ImageFormat::Gif => Some("image/gif"),
        ImageFormat::WebP => Some("image/webp"),
        _ => None,
    }
}

/// Whether the header's dimensions are within [`MAX_EDGE`] (read without decoding pixels).
fn fits_on_edge(bytes: &[u8], format: Option<ImageFormat>) -> bool {
    let Some(format) = format else {
        return false;
    };
    ImageReader::with_format(Cursor::new(bytes), format)
        .into_dimensions()
        .is_ok_and(|(width, height)| width <= MAX_EDGE && height <= MAX_EDGE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(image: &DynamicImage, format: ImageFormat) -> Vec<u8> {
        let mut out = Vec::new();
        image.write_to(&mut Cursor::new(&mut out), format).unwrap();
        out
    }

    fn raw(image: &ImagePart) -> Vec<u8> {
        base64::engine::general_purpose::STANDARD
            .decode(image.base64())
            .unwrap()
    }

    /// Noise compresses badly, so a large noisy PNG really is large.
    fn noisy(width: u32, height: u32, seed: u32) -> DynamicImage {
        let mut state = seed;
        let image = image::RgbImage::from_fn(width, height, |_, _| {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let [a, b, c, _] = state.to_le_bytes();
            image::Rgb([a, b, c])
        });
        DynamicImage::ImageRgb8(image)
    }

    #[test]
    fn small_images_in_common_formats_pass_unchanged() {
        let png = encoded(&noisy(64, 48, 1), ImageFormat::Png);
        let image = prepare(&png).unwrap();
        assert_eq!(image.media_type(), "image/png");
        assert_eq!(raw(&image), png);
    }

    #[test]
    fn other_formats_become_jpeg() {
        let bmp = encoded(&noisy(40, 30, 2), ImageFormat::Bmp);
        let image = prepare(&bmp).unwrap();
        assert_eq!(image.media_type(), "image/jpeg");
        assert_eq!(
            image::guess_format(&raw(&image)).unwrap(),
            ImageFormat::Jpeg
        );
    }

    #[test]
    fn oversized_images_are_scaled_under_the_cap() {
        let seed = 7;
        println!("seed {seed}");
        let png = encoded(&noisy(2400, 1800, seed), ImageFormat::Png);
        assert!(png.len() > MAX_RAW_BYTES, "the input must be over the cap");
        let image = prepare(&png).unwrap();
        assert_eq!(image.media_type(), "image/jpeg");
        assert!(image.base64().len() <= MAX_BASE64_BYTES);
        let decoded = image::load_from_memory(&raw(&image)).unwrap();
        assert!(decoded.width() <= TARGET_EDGE && decoded.height() <= TARGET_EDGE);
    }

    #[test]
    fn garbage_is_refused() {
        assert!(matches!(
            prepare(b"definitely not an image"),
            Err(ImageError::Decode(_))
        ));
    }
}
