//! Word resolution for the reader in `parse.rs`: quote removal, escapes, `~`, variables with
//! literal values, and the spelling tiny literal substitutions (`$(echo rm)`) appear to print.

use brush_parser::word::{Parameter, ParameterExpr, TildeExpr, WordPiece, WordPieceWithSource};

use super::{Invocation, ParseFailure, Producer, Reader, Word, options};

impl Reader<'_> {
    pub(super) fn heredoc(&mut self, body: &str, depth: usize) -> Result<Word, ParseFailure> {
        let pieces = brush_parser::word::parse_heredoc(body, &options())
            .map_err(|e| ParseFailure::Syntax(e.to_string()))?;
        let mut builder = WordBuilder::new(body);
        self.pieces(&pieces, depth, &mut builder, true)?;
        Ok(builder.finish())
    }

    /// Resolves one word.
    pub fn word(&mut self, raw: &str, depth: usize) -> Result<Word, ParseFailure> {
        let pieces = brush_parser::word::parse(raw, &options())
            .map_err(|e| ParseFailure::Syntax(e.to_string()))?;
        let mut builder = WordBuilder::new(raw);
        self.pieces(&pieces, depth, &mut builder, false)?;
        Ok(builder.finish())
    }

    fn pieces(
        &mut self,
        pieces: &[WordPieceWithSource],
        depth: usize,
        out: &mut WordBuilder,
        quoted: bool,
    ) -> Result<(), ParseFailure> {
        for piece in pieces {
            match &piece.piece {
                WordPiece::Text(text) => {
                    if !quoted && is_pattern(text) {
                        out.pattern = true;
                    }
                    out.push(text);
                }
                WordPiece::SingleQuotedText(text) => out.push(text),
                WordPiece::AnsiCQuotedText(text) => match ansi_c(text) {
                    Some(decoded) => out.push(&decoded),
                    None => out.unknown(),
                },
                WordPiece::EscapeSequence(text) => {
                    out.push(text.strip_prefix('\\').unwrap_or(text));
                }
                WordPiece::DoubleQuotedSequence(inner)
                | WordPiece::GettextDoubleQuotedSequence(inner) => {
                    self.pieces(inner, depth, out, true)?;
                }
                WordPiece::TildeExpansion(TildeExpr::Home) => match &self.scope.home {
                    Some(home) => {
                        let home = home.clone();
                        out.push(&home);
                    }
                    None => out.unknown(),
                },
                WordPiece::TildeExpansion(_) => out.unknown(),
                WordPiece::ParameterExpansion(ParameterExpr::Parameter {
                    parameter: Parameter::Named(name),
                    indirect: false,
                }) => match self.scope.vars.get(name) {
                    Some(value) => {
                        let value = value.clone();
                        out.expanded = true;
                        out.push(&value);
                    }
                    None => out.unknown(),
                },
                WordPiece::ParameterExpansion(_) | WordPiece::ArithmeticExpression(_) => {
                    out.unknown();
                }
                WordPiece::CommandSubstitution(text)
                | WordPiece::BackquotedCommandSubstitution(text) => {
                    let start = self.script.invocations.len();
                    let producers = self.nested_text(text, depth)?;
                    out.producers.extend(producers);
                    match literal_output(&self.script.invocations[start..]) {
                        Some(printed) => out.guessed(&printed),
                        None => out.unknown(),
                    }
                }
            }
        }
        Ok(())
    }
}

/// What a lone `echo WORDS` or `printf 'TEXT'` of literal words prints.
fn literal_output(invocations: &[Invocation]) -> Option<String> {
    let [only] = invocations else { return None };
    let argv: Vec<&str> = only
        .words
        .iter()
        .map(|w| w.value.as_deref())
        .collect::<Option<_>>()?;
    let (name, mut args) = argv.split_first()?;
    match *name {
        "echo" => {
            while args.first().is_some_and(|a| {
                a.len() > 1 && a.starts_with('-') && a[1..].chars().all(|c| "neE".contains(c))
            }) {
                args = &args[1..];
            }
            Some(args.join(" "))
        }
        "printf" if args.len() == 1 && !args[0].contains('%') => Some(unescape(args[0])),
        _ => None,
    }
}

/// `printf`'s backslash escapes: `\xHH`, octal `\0NNN`/`\NNN`, and the usual letters.
fn unescape(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('x') => {
                let hex: String = std::iter::from_fn(|| chars.next_if(char::is_ascii_hexdigit))
                    .take(2)
                    .collect();
                if let Some(ch) = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    out.push(ch);
                }
            }
            Some(d @ '0'..='7') => {
                let mut octal = d.to_string();
                while octal.len() < 4
                    && let Some(n) = chars.next_if(|c| ('0'..='7').contains(c))
                {
                    octal.push(n);
                }
                if let Some(ch) = u32::from_str_radix(&octal, 8).ok().and_then(char::from_u32) {
                    out.push(ch);
                }
            }
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

pub(super) fn literal_word(text: &str) -> Word {
    Word {
        raw: text.to_owned(),
        value: Some(text.to_owned()),
        known_tail: text.to_owned(),
        pattern: false,
        expanded: false,
        guess: Some(text.to_owned()),
        producers: Vec::new(),
    }
}

/// Unquoted `*`, `?`, `[` or a `{a,b}` brace list: the shell may rewrite the word.
fn is_pattern(text: &str) -> bool {
    let bracket = text
        .find('[')
        .is_some_and(|open| text[open + 1..].contains(']'));
    text.contains(['*', '?'])
        || bracket
        || (text.contains('{') && text.contains('}') && (text.contains(',') || text.contains("..")))
}

/// `$'…'` with no escapes is plain text; with escapes its value is left unknown.
fn ansi_c(text: &str) -> Option<String> {
    (!text.contains('\\')).then(|| text.to_owned())
}

struct WordBuilder {
    raw: String,
    value: String,
    known: bool,
    tail: String,
    pattern: bool,
    expanded: bool,
    guess: Option<String>,
    producers: Vec<Producer>,
}

impl WordBuilder {
    fn new(raw: &str) -> Self {
        WordBuilder {
            raw: raw.to_owned(),
            value: String::new(),
            known: true,
            tail: String::new(),
            pattern: false,
            expanded: false,
            guess: Some(String::new()),
            producers: Vec::new(),
        }
    }

    fn push(&mut self, text: &str) {
        self.value.push_str(text);
        self.tail.push_str(text);
        if let Some(guess) = &mut self.guess {
            guess.push_str(text);
        }
    }

    fn unknown(&mut self) {
        self.known = false;
        self.expanded = true;
        self.tail.clear();
        self.guess = None;
    }

    /// An unknown part that probably prints `text`.
    fn guessed(&mut self, text: &str) {
        let guess = self.guess.take().map(|g| g + text);
        self.unknown();
        self.guess = guess;
    }

    fn finish(self) -> Word {
        Word {
            raw: self.raw,
            value: self.known.then_some(self.value),
            known_tail: self.tail,
            pattern: self.pattern,
            expanded: self.expanded,
            guess: self.guess,
            producers: self.producers,
        }
    }
}

/// Parses a word on its own (for arguments re-read as commands, e.g. `find -exec`).
pub fn literal(text: &str) -> Word {
    literal_word(text)
}
