//! Our search syntax (the FTS5 query `state/search.rs` makes of the user's text: words,
//! `"phrases"`, `prefix*`, `AND`/`OR`/`NOT`) parsed into a tree, so PostgreSQL can answer it
//! with the same meaning: as a `tsquery` (word queries) or as substring matches (CJK).
//!
//! The grammar and its precedence are FTS5's, checked against SQLite: terms side by side bind
//! tightest (`a NOT b c` is `a NOT (b c)`), then `NOT` (binary: `a NOT b` is a and not b),
//! then `AND`, then `OR`. Operators are upper case only (`or` is a word). Anything FTS5
//! rejects (stray punctuation outside quotes, a dangling operator) is rejected here too, and
//! both backends then answer with no hits.
//!
//! The user's text never becomes SQL: a `tsquery` is bound as a parameter, and within it each
//! term is a quoted lexeme with its quotes and backslashes escaped.

/// A parsed search query.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A word or a quoted phrase (its text is split into words by the database's parser);
    /// `prefix` when followed by `*`.
    Term {
        text: String,
        prefix: bool,
    },
    /// All of these (side by side or joined by `AND`).
    And(Vec<Expr>),
    Or(Vec<Expr>),
    /// The first and not the second.
    Not(Box<Expr>, Box<Expr>),
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Term(String, bool),
    And,
    Or,
    Not,
}

/// FTS5's bareword characters: ASCII letters, digits and `_`, SUB, and anything non-ASCII.
fn is_bareword(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '\u{1A}' || !c.is_ascii()
}

fn tokenize(query: &str) -> Option<Vec<Token>> {
    let mut tokens = Vec::new();
    let mut chars = query.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        let (text, quoted) = if c == '"' {
            chars.next();
            let mut text = String::new();
            loop {
                match chars.next()? {
                    '"' if chars.peek() == Some(&'"') => {
                        chars.next();
                        text.push('"');
                    }
                    '"' => break,
                    c => text.push(c),
                }
            }
            (text, true)
        } else if is_bareword(c) {
            let mut text = String::new();
            while let Some(&c) = chars.peek().filter(|c| is_bareword(**c)) {
                text.push(c);
                chars.next();
            }
            (text, false)
        } else {
            return None;
        };
        let prefix = chars.peek() == Some(&'*');
        if prefix {
            chars.next();
        }
        tokens.push(match text.as_str() {
            "AND" if !quoted && !prefix => Token::And,
            "OR" if !quoted && !prefix => Token::Or,
            "NOT" if !quoted && !prefix => Token::Not,
            _ => Token::Term(text, prefix),
        });
    }
    Some(tokens)
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn eat(&mut self, token: &Token) -> bool {
        let found = self.tokens.get(self.at) == Some(token);
        if found {
            self.at += 1;
        }
        found
    }

    /// `or := and ("OR" and)*`; likewise down to terms side by side.
    fn or(&mut self) -> Option<Expr> {
        let mut parts = vec![self.and()?];
        while self.eat(&Token::Or) {
            parts.push(self.and()?);
        }
        Some(flatten(parts, Expr::Or))
    }

    fn and(&mut self) -> Option<Expr> {
        let mut parts = vec![self.not()?];
        while self.eat(&Token::And) {
            parts.push(self.not()?);
        }
        Some(flatten(parts, Expr::And))
    }

    fn not(&mut self) -> Option<Expr> {
        let mut expr = self.terms()?;
        while self.eat(&Token::Not) {
            expr = Expr::Not(Box::new(expr), Box::new(self.terms()?));
        }
        Some(expr)
    }

    fn terms(&mut self) -> Option<Expr> {
        let mut parts = Vec::new();
        while let Some(Token::Term(text, prefix)) = self.tokens.get(self.at) {
            parts.push(Expr::Term {
                text: text.clone(),
                prefix: *prefix,
            });
            self.at += 1;
        }
        (!parts.is_empty()).then(|| flatten(parts, Expr::And))
    }
}

fn flatten(mut parts: Vec<Expr>, join: fn(Vec<Expr>) -> Expr) -> Expr {
    if parts.len() == 1 {
        parts.remove(0)
    } else {
        join(parts)
    }
}

/// Parses a query; `None` when FTS5 would reject it (or it is empty).
pub fn parse(query: &str) -> Option<Expr> {
    let mut parser = Parser {
        tokens: tokenize(query)?,
        at: 0,
    };
    let expr = parser.or()?;
    (parser.at == parser.tokens.len()).then_some(expr)
}

/// The query as `to_tsquery` text: fully parenthesised, each term a quoted lexeme, a prefix
/// term marked `:*`. Each term is made what the indexed text is made (`search::SEARCH_WORDS`,
/// [`words_of`]): ASCII punctuation separates words, as in FTS5's `unicode61`, so
/// `"my-app.config"` is the phrase `'my app config'`, which `to_tsquery` makes
/// `'my' <-> 'app' <-> 'config'`; diacritics are removed. Quotes and backslashes are escaped
/// all the same.
pub fn to_tsquery(expr: &Expr) -> String {
    match expr {
        Expr::Term { text, prefix } => {
            let words = words_of(text);
            let escaped = words.replace('\\', "\\\\").replace('\'', "''");
            format!("'{escaped}'{}", if *prefix { ":*" } else { "" })
        }
        Expr::And(parts) => join(parts, " & "),
        Expr::Or(parts) => join(parts, " | "),
        Expr::Not(left, right) => format!("({} & !{})", to_tsquery(left), to_tsquery(right)),
    }
}

fn join(parts: &[Expr], operator: &str) -> String {
    let inner: Vec<String> = parts.iter().map(to_tsquery).collect();
    format!("({})", inner.join(operator))
}

/// Drops the terms a trigram index cannot match (fewer than 3 characters), as FTS5's trigram
/// tokenizer ignores them: a dropped term constrains nothing; `None` when nothing is left.
pub fn without_short_terms(expr: Expr) -> Option<Expr> {
    match expr {
        Expr::Term { ref text, .. } => (text.chars().count() >= 3).then_some(expr),
        Expr::And(parts) => keep(parts, Expr::And),
        Expr::Or(parts) => keep(parts, Expr::Or),
        Expr::Not(left, right) => {
            let left = without_short_terms(*left)?;
            Some(match without_short_terms(*right) {
                Some(right) => Expr::Not(Box::new(left), Box::new(right)),
                None => left,
            })
        }
    }
}

fn keep(parts: Vec<Expr>, join: fn(Vec<Expr>) -> Expr) -> Option<Expr> {
    let kept: Vec<Expr> = parts.into_iter().filter_map(without_short_terms).collect();
    (!kept.is_empty()).then(|| flatten(kept, join))
}

/// ASCII punctuation (each replaced by a space before words are split) as an SQL literal's
/// text, and the spaces replacing it, for `translate()`.
pub const PUNCTUATION: &str = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";

/// `text` as the word index sees it: ASCII punctuation turned into spaces, diacritics
/// removed ([`fold_diacritics`]).
pub fn words_of(text: &str) -> String {
    let spaced: String = text
        .chars()
        .map(|c| if PUNCTUATION.contains(c) { ' ' } else { c })
        .collect();
    fold_diacritics(&spaced)
}

/// `text` decomposed (NFD) without its combining diacritical marks (U+0300–U+036F), so `café`
/// and `cafe` are one word, as with FTS5's `remove_diacritics`. The word index applies the
/// same (`normalize(…, NFD)` and a `regexp_replace` of that range).
pub fn fold_diacritics(text: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    text.nfd()
        .filter(|c| !('\u{300}'..='\u{36F}').contains(c))
        .collect()
}

/// The terms a match must contain somewhere (not those under a `NOT`), with their prefix
/// flag, for marking matches in a snippet.
pub fn positive_terms(expr: &Expr) -> Vec<(&str, bool)> {
    match expr {
        Expr::Term { text, prefix } => vec![(text.as_str(), *prefix)],
        Expr::And(parts) | Expr::Or(parts) => parts.iter().flat_map(positive_terms).collect(),
        Expr::Not(left, _) => positive_terms(left),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(query: &str) -> Option<String> {
        parse(query).map(|e| to_tsquery(&e))
    }

    #[test]
    fn precedence_is_fts5s() {
        assert_eq!(ts("docker").as_deref(), Some("'docker'"));
        assert_eq!(
            ts("docker NOT staging x").as_deref(),
            Some("('docker' & !('staging' & 'x'))")
        );
        assert_eq!(
            ts("a OR b NOT c d").as_deref(),
            Some("('a' | ('b' & !('c' & 'd')))")
        );
        assert_eq!(ts("a AND b OR c").as_deref(), Some("(('a' & 'b') | 'c')"));
        assert_eq!(ts("a or b").as_deref(), Some("('a' & 'or' & 'b')"));
    }

    #[test]
    fn phrases_prefixes_and_quotes_are_escaped_lexemes() {
        assert_eq!(
            ts(r#""fix the docker" deploy*"#).as_deref(),
            Some("('fix the docker' & 'deploy':*)")
        );
        // Punctuation separates words; nothing of the user's text can end the lexeme.
        assert_eq!(ts(r#""it's a \ test""#).as_deref(), Some("'it s a   test'"));
        assert_eq!(ts(r#""say ""hi""""#).as_deref(), Some("'say  hi '"));
        assert_eq!(
            ts(r#""my-app.config.ts""#).as_deref(),
            Some("'my app config ts'")
        );
        assert_eq!(PUNCTUATION.len(), 32);
        assert_eq!(ts("Café naïve*").as_deref(), Some("('Cafe' & 'naive':*)"));
        assert_eq!(ts("a*b").as_deref(), Some("('a':* & 'b')"));
    }

    #[test]
    fn what_fts5_rejects_is_rejected() {
        for query in [
            "",
            "AND",
            "NOT docker",
            "docker OR",
            "x AND OR y",
            "thanks, and",
            "fix.",
            "my-app",
            "it's",
            "\"unterminated",
        ] {
            assert_eq!(parse(query), None, "{query:?}");
        }
    }

    #[test]
    fn trigram_drops_short_terms_like_fts5() {
        let short = |q: &str| {
            parse(q)
                .and_then(without_short_terms)
                .map(|e| to_tsquery(&e))
        };
        assert_eq!(short(r#""ab""#), None);
        assert_eq!(short(r#""部署环境" "ab""#).as_deref(), Some("'部署环境'"));
        assert_eq!(short(r#""ab" OR "docker""#).as_deref(), Some("'docker'"));
        assert_eq!(
            short(r#""部署环境" NOT "ab""#).as_deref(),
            Some("'部署环境'")
        );
        let expr = parse(r#""数据库" OR "部署环境" NOT "文档""#).unwrap();
        assert_eq!(
            positive_terms(&expr),
            [("数据库", false), ("部署环境", false)]
        );
    }
}
