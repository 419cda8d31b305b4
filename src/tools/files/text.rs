//! Text helpers shared by the file tools: line numbering, the read budget, binary
//! detection, line endings and the UTF-8 BOM (Python `file_operations.py` helpers).

/// Extensions never read as text (Python `binary_extensions.BINARY_EXTENSIONS`).
const BINARY_EXTENSIONS: &[&str] = &[
    ".png", ".jpg", ".jpeg", ".gif", ".bmp", ".ico", ".webp", ".tiff", ".tif", ".mp4", ".mov",
    ".avi", ".mkv", ".webm", ".wmv", ".flv", ".m4v", ".mpeg", ".mpg", ".mp3", ".wav", ".ogg",
    ".flac", ".aac", ".m4a", ".wma", ".aiff", ".opus", ".zip", ".tar", ".gz", ".bz2", ".7z",
    ".rar", ".xz", ".z", ".tgz", ".iso", ".exe", ".dll", ".so", ".dylib", ".bin", ".o", ".a",
    ".obj", ".lib", ".app", ".msi", ".deb", ".rpm", ".doc", ".docx", ".xls", ".xlsx", ".ppt",
    ".pptx", ".odt", ".ods", ".odp", ".ttf", ".otf", ".woff", ".woff2", ".eot", ".pyc", ".pyo",
    ".class", ".jar", ".war", ".ear", ".node", ".wasm", ".rlib", ".sqlite", ".sqlite3", ".db",
    ".mdb", ".idx", ".psd", ".ai", ".eps", ".sketch", ".fig", ".xd", ".blend", ".3ds", ".max",
    ".swf", ".fla", ".lockb", ".dat", ".data",
];

pub const BOM: char = '\u{feff}';

/// The lowercased extension with its dot, as Python's `path[path.rfind('.'):]`.
pub fn extension(path: &str) -> Option<String> {
    path.rfind('.').map(|dot| path[dot..].to_lowercase())
}

pub fn has_binary_extension(path: &str) -> bool {
    extension(path).is_some_and(|ext| BINARY_EXTENSIONS.contains(&ext.as_str()))
}

/// More than 30 % control characters (other than newline, CR, tab) in the first 1000
/// characters means binary.
pub fn looks_binary(sample: &str) -> bool {
    let chars: Vec<char> = sample.chars().take(1000).collect();
    if chars.is_empty() {
        return false;
    }
    let control = chars
        .iter()
        .filter(|&&c| (c as u32) < 32 && !matches!(c, '\n' | '\r' | '\t'))
        .count();
    control as f64 / chars.len() as f64 > 0.30
}

/// `N|line` numbering; lines longer than `max_line_length` are cut with `... [truncated]`.
pub fn add_line_numbers(lines: &[String], start_line: usize, max_line_length: usize) -> String {
    lines
        .iter()
        .enumerate()
        .map(|(i, line)| {
            let shown = if line.chars().count() > max_line_length {
                let head: String = line.chars().take(max_line_length).collect();
                format!("{head}... [truncated]")
            } else {
                line.clone()
            };
            format!("{}|{shown}", start_line + i)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Keeps whole lines of numbered content within `max_chars` (at least part of the first).
/// Returns the kept text, how many lines it holds, and whether anything was cut.
pub fn truncate_to_char_budget(content: &str, max_chars: usize) -> (String, usize, bool) {
    if content.chars().count() <= max_chars {
        let lines = if content.is_empty() {
            0
        } else {
            content.matches('\n').count() + 1
        };
        return (content.to_owned(), lines, false);
    }
    let mut kept: Vec<&str> = Vec::new();
    let mut running = 0;
    for line in content.split('\n') {
        let addition = line.chars().count() + usize::from(!kept.is_empty());
        if running + addition > max_chars {
            break;
        }
        kept.push(line);
        running += addition;
    }
    if kept.is_empty() {
        let first: String = content
            .split('\n')
            .next()
            .unwrap_or_default()
            .chars()
            .take(max_chars)
            .collect();
        return (first, 1, true);
    }
    (kept.join("\n"), kept.len(), true)
}

/// `\r\n` when the first 4 KiB contain one, `\n` when they contain a newline.
pub fn detect_line_ending(sample: &str) -> Option<&'static str> {
    let head: String = sample.chars().take(4096).collect();
    if head.contains("\r\n") {
        Some("\r\n")
    } else if head.contains('\n') {
        Some("\n")
    } else {
        None
    }
}

pub fn normalize_line_endings(text: &str, target: &str) -> String {
    let lf = text.replace("\r\n", "\n").replace('\r', "\n");
    if target == "\r\n" {
        lf.replace('\n', "\r\n")
    } else {
        lf
    }
}

pub fn strip_bom(text: &str) -> (&str, bool) {
    match text.strip_prefix(BOM) {
        Some(rest) => (rest, true),
        None => (text, false),
    }
}

const READ_DEDUP_STATUS_MESSAGE: &str =
    "Unchanged since your last read_file of it in this conversation; that result still holds.";

/// Content that is read_file's numbered display (or its status text), not file bytes.
pub fn is_internal_file_tool_content(content: &str) -> bool {
    let stripped = content.trim();
    if !stripped.is_empty()
        && (stripped == READ_DEDUP_STATUS_MESSAGE
            || (stripped.contains(READ_DEDUP_STATUS_MESSAGE)
                && stripped.chars().count() <= 2 * READ_DEDUP_STATUS_MESSAGE.chars().count()))
    {
        return true;
    }
    let lines: Vec<&str> = content.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.len() < 2 {
        return false;
    }
    let numbered: Vec<u64> = lines
        .iter()
        .filter_map(|line| {
            let (prefix, _) = line.trim_start().split_once('|')?;
            (!prefix.is_empty() && prefix.chars().all(|c| c.is_ascii_digit()))
                .then(|| prefix.parse().ok())
                .flatten()
        })
        .collect();
    if numbered.len() < 2 || (numbered.len() as f64) / (lines.len() as f64) < 0.6 {
        return false;
    }
    let consecutive = numbered.windows(2).filter(|w| w[1] == w[0] + 1).count();
    consecutive + 1 >= numbered.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbering_and_budget() {
        let lines: Vec<String> = ["a", "bbbbbb", "c"].iter().map(|s| s.to_string()).collect();
        assert_eq!(
            add_line_numbers(&lines, 7, 3),
            "7|a\n8|bbb... [truncated]\n9|c"
        );
        assert_eq!(
            truncate_to_char_budget("1|a\n2|b\n3|c", 7),
            ("1|a\n2|b".to_owned(), 2, true)
        );
        assert_eq!(
            truncate_to_char_budget("1|abcdef", 4),
            ("1|ab".to_owned(), 1, true)
        );
        assert_eq!(
            truncate_to_char_budget("1|a", 10),
            ("1|a".to_owned(), 1, false)
        );
    }

    #[test]
    fn detections() {
        assert!(has_binary_extension("x/photo.PNG"));
        assert!(!has_binary_extension("main.rs"));
        assert!(looks_binary("\0\0\0\0abc"));
        assert!(!looks_binary("plain text\n"));
        assert_eq!(detect_line_ending("a\r\nb"), Some("\r\n"));
        assert_eq!(detect_line_ending("a\nb"), Some("\n"));
        assert_eq!(detect_line_ending("ab"), None);
        assert_eq!(normalize_line_endings("a\nb\r\nc", "\r\n"), "a\r\nb\r\nc");
        assert_eq!(strip_bom("\u{feff}x"), ("x", true));
        assert!(is_internal_file_tool_content("1|fn main() {\n2|}\n"));
        assert!(!is_internal_file_tool_content("a|b\nc|d\n"));
        assert!(!is_internal_file_tool_content("1|only one line"));
    }
}
