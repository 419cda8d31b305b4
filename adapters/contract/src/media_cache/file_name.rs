//! The one rule for naming a downloaded attachment in the media cache. Every adapter builds
//! its cache path as `<its own prefix>_<safe_file_name(platform's name)>`, so a name a user
//! chose can neither leave the cache directory nor differ between platforms.

/// The longest name kept, in bytes. Filesystems cap one path component at 255 bytes and the
/// adapters put an id in front; bytes, not characters, because a CJK or accented name takes
/// two to four bytes a character.
pub const MAX_FILE_NAME_BYTES: usize = 120;

/// An extension longer than this is not worth keeping when the name is cut.
const MAX_KEPT_EXTENSION_BYTES: usize = 16;

/// What an empty (or all-dots) name becomes.
const FALLBACK: &str = "file";

/// `name` made safe to use as one file name inside the cache directory:
///
/// - letters and digits of any script are kept, as are `.`, `-` and `_`;
/// - everything else becomes `_`: path separators (`/`, `\`), control characters (NUL…),
///   invisible format characters (the right-to-left override that disguises an extension),
///   spaces, punctuation and emoji;
/// - leading dots are dropped, so the result is never `.`, `..` or a hidden file;
/// - the result is at most [`MAX_FILE_NAME_BYTES`] bytes, cut on a character boundary and
///   keeping a short extension;
/// - an empty result becomes `file`.
pub fn safe_file_name(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let cleaned = cleaned.trim_start_matches('.');
    if cleaned.is_empty() {
        return FALLBACK.to_owned();
    }
    if cleaned.len() <= MAX_FILE_NAME_BYTES {
        return cleaned.to_owned();
    }
    match cleaned.rsplit_once('.') {
        Some((stem, extension))
            if !stem.is_empty() && extension.len() <= MAX_KEPT_EXTENSION_BYTES =>
        {
            let room = MAX_FILE_NAME_BYTES - extension.len() - 1;
            format!("{}.{extension}", cut(stem, room))
        }
        _ => cut(cleaned, MAX_FILE_NAME_BYTES).to_owned(),
    }
}

/// The longest prefix of `text` of at most `max` bytes that ends on a character boundary.
fn cut(text: &str, max: usize) -> &str {
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_tricks_stay_one_name_inside_the_cache() {
        assert_eq!(safe_file_name("../../etc/passwd"), "_.._etc_passwd");
        assert_eq!(safe_file_name(".."), "file");
        assert_eq!(safe_file_name("."), "file");
        assert_eq!(safe_file_name(".bashrc"), "bashrc");
        assert_eq!(safe_file_name("a/b"), "a_b");
        assert_eq!(safe_file_name(r"..\..\boot.ini"), "_.._boot.ini");
        assert_eq!(safe_file_name("/"), "_");
        assert_eq!(safe_file_name(""), "file");
    }

    #[test]
    fn control_and_invisible_characters_are_replaced() {
        assert_eq!(safe_file_name("a\0b.txt"), "a_b.txt");
        assert_eq!(safe_file_name("line\nbreak"), "line_break");
        // U+202E would show "invoice_fdp.exe" as "invoice_exe.pdf".
        assert_eq!(
            safe_file_name("invoice_\u{202e}fdp.exe"),
            "invoice__fdp.exe"
        );
    }

    #[test]
    fn letters_and_digits_of_every_script_are_kept() {
        assert_eq!(safe_file_name("résumé.pdf"), "résumé.pdf");
        assert_eq!(safe_file_name("отчёт 2024.docx"), "отчёт_2024.docx");
        assert_eq!(safe_file_name("写真.jpg"), "写真.jpg");
        assert_eq!(safe_file_name("report 1.pdf"), "report_1.pdf");
        assert_eq!(safe_file_name("party 🎉.png"), "party__.png");
    }

    #[test]
    fn long_names_are_cut_on_a_character_boundary_keeping_the_extension() {
        let long = format!("{}.pdf", "写".repeat(100));
        let safe = safe_file_name(&long);
        assert!(safe.len() <= MAX_FILE_NAME_BYTES, "{} bytes", safe.len());
        assert!(safe.ends_with(".pdf"), "{safe}");
        assert!(safe.starts_with("写写"), "{safe}");

        let no_extension = "é".repeat(200);
        let safe = safe_file_name(&no_extension);
        assert_eq!(safe, "é".repeat(MAX_FILE_NAME_BYTES / 2));

        let odd = format!("a{}", "é".repeat(200));
        assert!(safe_file_name(&odd).len() <= MAX_FILE_NAME_BYTES);
    }
}
