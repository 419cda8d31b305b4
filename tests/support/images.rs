//! Small real images for the tests that send photos.

use std::io::Cursor;

/// An 8×6 PNG gradient (a real, decodable image).
pub fn png() -> Vec<u8> {
    let image = image::RgbImage::from_fn(8, 6, |x, y| image::Rgb([x as u8 * 30, y as u8 * 40, 90]));
    let mut out = Vec::new();
    image::DynamicImage::ImageRgb8(image)
        .write_to(&mut Cursor::new(&mut out), image::ImageFormat::Png)
        .unwrap();
    out
}
