//! Search snippets on PostgreSQL shaped as SQLite's: matches between `>>>` and `<<<`, `...`
//! where the text was cut (FTS5's `snippet()`), or for the short-CJK fallback the content
//! around the first term, unmarked (SQLite's `substr(content, instr(...) - 40, 120)`).

/// Marks as FTS5's `snippet()` does.
const OPEN: &str = ">>>";
const CLOSE: &str = "<<<";
const CUT: &str = "...";

/// Characters a marked substring snippet shows (FTS5's trigram snippet is 40 tokens of
/// about one character each).
const WINDOW_CHARS: usize = 40;
/// Characters shown before the first match.
const LEAD_CHARS: usize = 10;

/// `ts_headline`'s excerpt of `doc`, with `...` on each side where it cut `doc` off.
pub fn with_ellipses(headline: &str, doc: &str) -> String {
    let plain = headline.replace(OPEN, "").replace(CLOSE, "");
    let mut out = String::new();
    if !doc.trim_start().starts_with(plain.trim_start()) {
        out.push_str(CUT);
    }
    out.push_str(headline.trim());
    if !doc.trim_end().ends_with(plain.trim_end()) {
        out.push_str(CUT);
    }
    out
}

/// A window of `doc` from just before its first match of any term (ignoring case), every
/// match in it marked.
pub fn marked(doc: &str, terms: &[&str]) -> String {
    let chars: Vec<char> = doc.chars().collect();
    let lower: Vec<char> = chars.iter().map(|c| fold(*c)).collect();
    let terms: Vec<Vec<char>> = terms
        .iter()
        .map(|t| t.chars().map(fold).collect::<Vec<_>>())
        .filter(|t| !t.is_empty())
        .collect();
    let match_at = |i: usize| {
        terms
            .iter()
            .filter(|t| lower[i..].starts_with(t))
            .map(Vec::len)
            .max()
    };
    let first = (0..chars.len())
        .find(|i| match_at(*i).is_some())
        .unwrap_or(0);
    let start = first.saturating_sub(LEAD_CHARS);
    let mut end = (start + WINDOW_CHARS).min(chars.len());
    let mut out = String::new();
    if start > 0 {
        out.push_str(CUT);
    }
    let mut i = start;
    while i < end {
        match match_at(i) {
            Some(len) => {
                out.push_str(OPEN);
                out.extend(&chars[i..i + len]);
                out.push_str(CLOSE);
                i += len;
                end = end.max(i);
            }
            None => {
                out.push(chars[i]);
                i += 1;
            }
        }
    }
    if end < chars.len() {
        out.push_str(CUT);
    }
    out
}

/// Case folding for matching, as `ILIKE` ignores case.
fn fold(c: char) -> char {
    c.to_lowercase().next().unwrap_or(c)
}

/// SQLite's `substr(content, max(1, instr(content, term) - 40), 120)`: 120 characters from
/// 40 before the first (case-sensitive) occurrence of `term`, or from the start.
pub fn around(content: &str, term: &str) -> String {
    let first = content
        .find(term)
        .map(|byte| content[..byte].chars().count())
        .unwrap_or(0);
    content
        .chars()
        .skip(first.saturating_sub(40))
        .take(120)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headline_gets_ellipses_only_where_cut() {
        assert_eq!(
            with_ellipses("fix the >>>docker<<< now", "fix the docker now  "),
            "fix the >>>docker<<< now"
        );
        assert_eq!(
            with_ellipses(">>>docker<<< is", "I say docker is great"),
            "...>>>docker<<< is..."
        );
    }

    #[test]
    fn substring_snippets_mark_every_match_in_the_window() {
        assert_eq!(
            marked("我们需要部署环境的文档", &["部署环境"]),
            "我们需要>>>部署环境<<<的文档"
        );
        let long = format!("{}Docker and docker{}", "x".repeat(30), "y".repeat(60));
        assert_eq!(
            marked(&long, &["docker"]),
            format!(
                "...{}>>>Docker<<< and >>>docker<<<{}...",
                "x".repeat(10),
                "y".repeat(13)
            )
        );
        assert_eq!(around("部署 已完成", "已完成"), "部署 已完成");
        let long = format!("{}部署{}", "a".repeat(50), "b".repeat(200));
        assert_eq!(around(&long, "部署").chars().count(), 120);
        assert!(around(&long, "部署").starts_with(&"a".repeat(40)));
    }
}
