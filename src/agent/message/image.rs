//! An image that rides along with a user message (a photo sent from a chat). It lives only in
//! memory: the stored message keeps its text (which names the cached file), never the pixels,
//! as state.db rows stay text for the Python Hermes reading them.

use std::fmt;
use std::sync::Arc;

/// One image, already in a format every vision API takes (PNG, JPEG, GIF or WebP) and
/// within the size cap, held base64-encoded because that is how all three wire formats
/// carry it.
#[derive(Clone, PartialEq, Eq)]
pub struct ImagePart(Arc<ImageBytes>);

#[derive(PartialEq, Eq)]
struct ImageBytes {
    media_type: String,
    base64: String,
}

impl ImagePart {
    /// `media_type` is the image's MIME type (`image/jpeg`); `base64` its standard-alphabet
    /// encoding.
    pub fn new(media_type: impl Into<String>, base64: impl Into<String>) -> Self {
        Self(Arc::new(ImageBytes {
            media_type: media_type.into(),
            base64: base64.into(),
        }))
    }

    pub fn media_type(&self) -> &str {
        &self.0.media_type
    }

    pub fn base64(&self) -> &str {
        &self.0.base64
    }

    /// The `data:` URL the OpenAI formats take (`image_url.url`, `input_image.image_url`).
    pub fn data_url(&self) -> String {
        format!("data:{};base64,{}", self.0.media_type, self.0.base64)
    }
}

impl fmt::Debug for ImagePart {
    // A debug print of a history must not dump megabytes of base64.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ImagePart({}, {} base64 bytes)",
            self.0.media_type,
            self.0.base64.len()
        )
    }
}
