//! Search snippets on PostgreSQL shaped as SQLite's: matches between `>>>` and `<<<`, `...`
//! where the text was cut (FTS5's `snippet()`), or for the short-CJK fallback the content
//! around the first term, unmarked (SQLite's `substr(content, instr(...) - 40, 120)`). Made
//! here rather than by `ts_headline`, whose idea of a word is PostgreSQL's parser's
//! (`github.com` whole), not FTS5's.

/// Marks as FTS5's `snippet()` does.
use super::search_syntax::fold_diacritics;

const OPEN: &str = ">>>";
const CLOSE: &str = "<<<";
const CUT: &str = "...";

/// Characters a marked substring snippet shows (FTS5's trigram snippet is 40 tokens of
/// about one character each).
const WINDOW_CHARS: usize = 40;
/// Characters shown before the first match.
const LEAD_CHARS: usize = 10;

/// Words a word-query snippet shows (FTS5's `snippet(..., 40)`), and before the first match.
const WORDS_WINDOW: usize = 40;
const WORDS_LEAD: usize = 10;

/// A snippet for a word query: `doc`'s words (runs of letters and digits, FTS5's
/// `unicode61` words) that match a term's words are marked, ignoring case and diacritics (the
/// last word of a prefix term as a prefix); a long text is cut to a window of words from just before the
/// first match.
pub fn words(doc: &str, terms: &[(&str, bool)]) -> String {
    let tokens = word_spans(doc);
    let mut wanted: Vec<(String, bool)> = Vec::new();
    for (text, prefix) in terms {
        let spans = word_spans(text);
        for (i, (start, end)) in spans.iter().enumerate() {
            let word = fold_diacritics(&text[*start..*end]).to_lowercase();
            wanted.push((word, *prefix && i + 1 == spans.len()));
        }
    }
    let hit: Vec<bool> = tokens
        .iter()
        .map(|(start, end)| {
            let word = fold_diacritics(&doc[*start..*end]).to_lowercase();
            wanted.iter().any(|(w, prefix)| {
                if *prefix {
                    word.starts_with(w.as_str())
                } else {
                    word == *w
                }
            })
        })
        .collect();
    let n = tokens.len();
    let (first, last) = if n <= WORDS_WINDOW {
        (0, n)
    } else {
        let first_hit = hit.iter().position(|h| *h).unwrap_or(0);
        let first = first_hit.saturating_sub(WORDS_LEAD).min(n - WORDS_WINDOW);
        (first, first + WORDS_WINDOW)
    };
    let mut out = String::new();
    let mut cursor = 0;
    if first > 0 {
        out.push_str(CUT);
        cursor = tokens[first].0;
    }
    for i in first..last {
        let (start, end) = tokens[i];
        out.push_str(&doc[cursor..start]);
        if hit[i] {
            out.push_str(OPEN);
            out.push_str(&doc[start..end]);
            out.push_str(CLOSE);
        } else {
            out.push_str(&doc[start..end]);
        }
        cursor = end;
    }
    if last == n {
        out.push_str(&doc[cursor..]);
    } else {
        out.push_str(CUT);
    }
    out
}

/// The byte spans of `text`'s words: runs of letters and digits.
fn word_spans(text: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices() {
        match (c.is_alphanumeric(), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                spans.push((s, i));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        spans.push((s, text.len()));
    }
    spans
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
    fn word_snippets_mark_words_and_cut_long_text() {
        assert_eq!(
            words(
                "How do I fix the Docker deployment?  ",
                &[("docker", false)]
            ),
            "How do I fix the >>>Docker<<< deployment?  "
        );
        assert_eq!(
            words(
                "see https://github.com/x and deploys",
                &[("GitHub", false), ("deploy", true)]
            ),
            "see https://>>>github<<<.com/x and >>>deploys<<<"
        );
        assert_eq!(
            words("a my-app.config.ts b", &[("my-app.config", false)]),
            "a >>>my<<<->>>app<<<.>>>config<<<.ts b"
        );
        assert_eq!(
            words("un café naïf", &[("cafe", false), ("NAÏ", true)]),
            "un >>>café<<< >>>naïf<<<"
        );
        let long: Vec<String> = (0..100).map(|i| format!("w{i}")).collect();
        let snippet = words(&long.join(" "), &[("w50", false)]);
        assert!(snippet.starts_with("...w40 "), "{snippet}");
        assert!(snippet.contains(" >>>w50<<< "), "{snippet}");
        assert!(snippet.ends_with(" w79..."), "{snippet}");
        let end = words(&long.join(" "), &[("w99", false)]);
        assert!(
            end.starts_with("...w60 ") && end.ends_with(">>>w99<<<"),
            "{end}"
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
