//! The one shell reader of the project: a thin layer over `brush-parser` (the parser of the
//! brush shell, docs/adr/0001-shell-parser.md) that turns a command line into the flat list of
//! simple commands bash would run — including those inside `$(…)`, backticks, process
//! substitutions, here-documents, subshells, groups, loops and function bodies — each with its
//! words resolved as far as they can be without running anything.
//!
//! A word is *literal* when its value is known before the shell runs: plain text, quotes,
//! escapes, `~`, and variables given a literal value earlier in the same command line (or
//! `HOME`/`HERMES_HOME` from the tool environment). Anything else (another variable, a
//! command substitution, arithmetic, a glob in a command name) leaves the value unknown.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use brush_parser::ast::{self, Command, CommandPrefixOrSuffixItem, CompoundCommand, IoRedirect};
use brush_parser::{Parser, ParserOptions};

/// How deep `$(…)` inside `$(…)` (and similar) is followed before giving up.
pub const MAX_NESTING: usize = 8;

/// Why a command line could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseFailure {
    #[error("the shell parser cannot read this command: {0}")]
    Syntax(String),
    #[error("the command nests substitutions deeper than {MAX_NESTING} levels")]
    TooDeep,
}

/// A command that feeds another one: its name and literal arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Producer {
    pub name: String,
    pub args: Vec<String>,
}

/// One shell word as far as it is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Word {
    /// The text as written.
    pub raw: String,
    /// The value after quote removal and the expansions known without running anything.
    pub value: Option<String>,
    /// The literal text after the last unknown part (`$D/.bashrc` → `/.bashrc`).
    pub known_tail: String,
    /// An unquoted glob or brace pattern: the shell may turn it into other words.
    pub pattern: bool,
    /// A variable was expanded (even one whose value is known).
    pub expanded: bool,
    /// The value if tiny literal substitutions (`$(echo rm)`, `$(printf '\x72')`) print what
    /// they appear to: a spelling for the pattern table, never a reason to trust the word.
    pub guess: Option<String>,
    /// Commands whose output becomes (part of) this word: `$(…)`, backticks, `<(…)`.
    pub producers: Vec<Producer>,
}

impl Word {
    /// The value, or the raw text where the value is unknown (for messages and patterns).
    pub fn shown(&self) -> &str {
        self.value.as_deref().unwrap_or(&self.raw)
    }
}

/// Which way a redirection moves data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedirectKind {
    Read,
    Write,
    ReadWrite,
    /// `<<` and `<<<`: the target word is the text fed to standard input.
    HereText,
    /// `>&2`, `<&0`: no file involved.
    Duplicate,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    pub kind: RedirectKind,
    /// `>` etc. as the shell spelling, for the pattern table.
    pub operator: &'static str,
    pub target: Word,
}

/// One simple command as bash would run it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// The command word and its arguments (assignments and redirections excluded).
    pub words: Vec<Word>,
    pub redirects: Vec<Redirect>,
    /// Commands whose output reaches this one's standard input: earlier pipeline stages,
    /// `< <(…)`, and substitutions inside a here-document or here-string.
    pub stdin_from: Vec<Producer>,
    /// Whether standard input comes from a pipe, a here-document or a here-string.
    pub stdin_is_text: bool,
    /// The directory it runs in, when known.
    pub cwd: Option<PathBuf>,
    /// How many substitutions deep it sits (0 = typed at the prompt).
    pub depth: usize,
}

/// The simple commands of a command line, in order, and the pipelines they form.
#[derive(Debug, Clone, Default)]
pub struct Script {
    pub invocations: Vec<Invocation>,
    /// Ranges of `invocations` that form one pipeline of two or more stages.
    pub pipelines: Vec<std::ops::Range<usize>>,
    /// A command of the command line itself (not one inside a group, function or
    /// substitution) is started in the background (`cmd &`).
    pub background: bool,
}

impl Script {
    /// The command names (basenames of literal command words) in order.
    pub fn command_names(&self) -> impl Iterator<Item = &str> {
        self.invocations
            .iter()
            .filter_map(|inv| inv.words.first()?.value.as_deref())
            .map(basename)
    }

    /// The last simple command typed at the prompt: the one whose exit code the shell returns.
    pub fn last_top_level(&self) -> Option<&Invocation> {
        self.invocations.iter().rev().find(|inv| inv.depth == 0)
    }
}

/// Parses `text` with nothing known about the machine (no home, no directory): for callers
/// that only need the command structure, not paths.
pub fn outline(text: &str) -> Result<Script, ParseFailure> {
    read_script(text, &mut Scope::new(None, None, None))
}

/// What the reader knows while walking: variables with literal values and the directory.
#[derive(Debug, Clone)]
pub struct Scope {
    pub vars: HashMap<String, String>,
    pub cwd: Option<PathBuf>,
    pub home: Option<String>,
}

impl Scope {
    /// `home` is the tool environment's `HOME`; `hermes_home` its `HERMES_HOME`.
    pub fn new(home: Option<&str>, hermes_home: Option<&str>, cwd: Option<&Path>) -> Self {
        let mut vars = HashMap::new();
        if let Some(home) = home {
            vars.insert("HOME".to_owned(), home.to_owned());
        }
        if let Some(hermes) = hermes_home {
            vars.insert("HERMES_HOME".to_owned(), hermes.to_owned());
        }
        Scope {
            vars,
            cwd: cwd.map(Path::to_path_buf),
            home: home.map(str::to_owned),
        }
    }
}

mod words;

pub use words::literal;
use words::literal_word;

fn options() -> ParserOptions {
    ParserOptions::default()
}

/// Parses `text` and lists its simple commands, following substitutions.
pub fn read_script(text: &str, scope: &mut Scope) -> Result<Script, ParseFailure> {
    let mut reader = Reader {
        script: Script::default(),
        scope,
    };
    reader.program(text, 0, &[])?;
    Ok(reader.script)
}

struct Reader<'s> {
    script: Script,
    scope: &'s mut Scope,
}

impl Reader<'_> {
    fn program(
        &mut self,
        text: &str,
        depth: usize,
        stdin_from: &[Producer],
    ) -> Result<(), ParseFailure> {
        if depth > MAX_NESTING {
            return Err(ParseFailure::TooDeep);
        }
        let mut parser = Parser::new(std::io::Cursor::new(text.as_bytes()), &options());
        let program = parser
            .parse_program()
            .map_err(|e| ParseFailure::Syntax(e.to_string()))?;
        for complete in &program.complete_commands {
            if depth == 0
                && complete
                    .0
                    .iter()
                    .any(|item| matches!(item.1, ast::SeparatorOperator::Async))
            {
                self.script.background = true;
            }
            self.compound_list(complete, depth, stdin_from)?;
        }
        Ok(())
    }

    fn compound_list(
        &mut self,
        list: &ast::CompoundList,
        depth: usize,
        stdin_from: &[Producer],
    ) -> Result<(), ParseFailure> {
        for ast::CompoundListItem(and_or, _) in &list.0 {
            self.pipeline(&and_or.first, depth, stdin_from)?;
            for next in &and_or.additional {
                let (ast::AndOr::And(p) | ast::AndOr::Or(p)) = next;
                self.pipeline(p, depth, stdin_from)?;
            }
        }
        Ok(())
    }

    fn pipeline(
        &mut self,
        pipeline: &ast::Pipeline,
        depth: usize,
        stdin_from: &[Producer],
    ) -> Result<(), ParseFailure> {
        let start = self.script.invocations.len();
        let mut upstream: Vec<Producer> = stdin_from.to_vec();
        for (i, command) in pipeline.seq.iter().enumerate() {
            let piped = i > 0;
            let first_new = self.script.invocations.len();
            self.command(command, depth, &upstream, piped)?;
            // Everything the stage ran (and the words it carried) flows on downstream.
            for inv in &self.script.invocations[first_new..] {
                if inv.depth == depth {
                    if let Some(p) = producer_of(inv) {
                        upstream.push(p);
                    }
                    for word in &inv.words {
                        upstream.extend(word.producers.iter().cloned());
                    }
                }
            }
        }
        let end = self.script.invocations.len();
        if pipeline.seq.len() > 1 {
            self.script.pipelines.push(start..end);
        }
        Ok(())
    }

    fn command(
        &mut self,
        command: &Command,
        depth: usize,
        stdin_from: &[Producer],
        piped: bool,
    ) -> Result<(), ParseFailure> {
        match command {
            Command::Simple(simple) => self.simple(simple, depth, stdin_from, piped),
            Command::Compound(compound, redirects) => {
                let mut feed = stdin_from.to_vec();
                if let Some(list) = redirects {
                    for r in &list.0 {
                        let redirect = self.redirect(r, depth)?;
                        feed.extend(redirect.target.producers.iter().cloned());
                    }
                }
                self.compound(compound, depth, &feed)
            }
            Command::Function(function) => {
                let ast::FunctionBody(body, _) = &function.body;
                self.compound(body, depth, stdin_from)
            }
            Command::ExtendedTest(_, _) => Ok(()),
        }
    }

    fn compound(
        &mut self,
        compound: &CompoundCommand,
        depth: usize,
        stdin_from: &[Producer],
    ) -> Result<(), ParseFailure> {
        match compound {
            CompoundCommand::BraceGroup(g) => self.compound_list(&g.list, depth, stdin_from),
            CompoundCommand::Subshell(s) => self.compound_list(&s.list, depth, stdin_from),
            CompoundCommand::ForClause(f) => {
                for value in f.values.iter().flatten() {
                    let word = self.word(&value.value, depth)?;
                    if let Some(v) = word.value {
                        self.scope.vars.insert(f.variable_name.clone(), v);
                    } else {
                        self.scope.vars.remove(&f.variable_name);
                    }
                }
                self.compound_list(&f.body.list, depth, stdin_from)
            }
            CompoundCommand::ArithmeticForClause(f) => {
                self.compound_list(&f.body.list, depth, stdin_from)
            }
            CompoundCommand::CaseClause(c) => {
                for item in &c.cases {
                    if let Some(list) = &item.cmd {
                        self.compound_list(list, depth, stdin_from)?;
                    }
                }
                Ok(())
            }
            CompoundCommand::IfClause(i) => {
                self.compound_list(&i.condition, depth, stdin_from)?;
                self.compound_list(&i.then, depth, stdin_from)?;
                for e in i.elses.iter().flatten() {
                    if let Some(c) = &e.condition {
                        self.compound_list(c, depth, stdin_from)?;
                    }
                    self.compound_list(&e.body, depth, stdin_from)?;
                }
                Ok(())
            }
            CompoundCommand::WhileClause(w) | CompoundCommand::UntilClause(w) => {
                self.compound_list(&w.0, depth, stdin_from)?;
                self.compound_list(&w.1.list, depth, stdin_from)
            }
            CompoundCommand::Coprocess(c) => self.command(&c.body, depth, stdin_from, false),
            CompoundCommand::Arithmetic(_) => Ok(()),
        }
    }

    fn simple(
        &mut self,
        simple: &ast::SimpleCommand,
        depth: usize,
        stdin_from: &[Producer],
        piped: bool,
    ) -> Result<(), ParseFailure> {
        let mut words = Vec::new();
        let mut redirects = Vec::new();
        let mut assignments = Vec::new();
        let items = simple
            .prefix
            .iter()
            .flat_map(|p| p.0.iter())
            .map(Some)
            .chain(std::iter::once(None))
            .chain(simple.suffix.iter().flat_map(|s| s.0.iter()).map(Some));
        let mut after_command = false;
        for item in items {
            match item {
                Some(CommandPrefixOrSuffixItem::AssignmentWord(_, raw)) if after_command => {
                    // `dd of=x`: after the command word it is an argument like any other.
                    words.push(self.word(&raw.value, depth)?);
                }
                None => {
                    after_command = true;
                    if let Some(w) = &simple.word_or_name {
                        words.push(self.word(&w.value, depth)?);
                    }
                }
                Some(CommandPrefixOrSuffixItem::Word(w)) => words.push(self.word(&w.value, depth)?),
                Some(CommandPrefixOrSuffixItem::IoRedirect(r)) => {
                    redirects.push(self.redirect(r, depth)?);
                }
                Some(CommandPrefixOrSuffixItem::AssignmentWord(assignment, _)) => {
                    let value = match &assignment.value {
                        ast::AssignmentValue::Scalar(w) => self.word(&w.value, depth)?.value,
                        ast::AssignmentValue::Array(_) => None,
                    };
                    let name = match &assignment.name {
                        ast::AssignmentName::VariableName(n) => n.clone(),
                        ast::AssignmentName::ArrayElementName(n, _) => n.clone(),
                    };
                    assignments.push((name, value));
                }
                Some(CommandPrefixOrSuffixItem::ProcessSubstitution(_, sub)) => {
                    let producers = self.nested_list(&sub.list, depth)?;
                    words.push(Word {
                        raw: "<(…)".to_owned(),
                        value: None,
                        known_tail: String::new(),
                        pattern: false,
                        expanded: true,
                        guess: None,
                        producers,
                    });
                }
            }
        }
        if words.is_empty() {
            // Plain assignments change what later words expand to.
            for (name, value) in assignments {
                match value {
                    Some(v) => self.scope.vars.insert(name, v),
                    None => self.scope.vars.remove(&name),
                };
            }
        }
        let mut feed = stdin_from.to_vec();
        let mut stdin_is_text = piped;
        for r in &redirects {
            match r.kind {
                RedirectKind::HereText => {
                    stdin_is_text = true;
                    feed.extend(r.target.producers.iter().cloned());
                }
                RedirectKind::Read | RedirectKind::ReadWrite => {
                    feed.extend(r.target.producers.iter().cloned());
                }
                _ => {}
            }
        }
        let invocation = Invocation {
            words,
            redirects,
            stdin_from: feed,
            stdin_is_text,
            cwd: self.scope.cwd.clone(),
            depth,
        };
        self.follow_cd(&invocation);
        self.script.invocations.push(invocation);
        Ok(())
    }

    /// `cd DIR` moves later relative paths; a `cd` nobody can predict forgets the directory.
    fn follow_cd(&mut self, invocation: &Invocation) {
        let Some(name) = invocation.words.first().and_then(|w| w.value.as_deref()) else {
            return;
        };
        if !matches!(name, "cd" | "pushd" | "popd") {
            return;
        }
        let operand = invocation
            .words
            .iter()
            .skip(1)
            .find(|w| !w.value.as_deref().is_some_and(|v| v.starts_with('-')));
        self.scope.cwd = match (name, operand) {
            ("popd", _) => None,
            (_, None) => self.scope.home.as_deref().map(PathBuf::from),
            (_, Some(word)) => match (&word.value, &self.scope.cwd) {
                (Some(dir), _) if dir.starts_with('/') => Some(PathBuf::from(dir)),
                (Some(dir), Some(cwd)) => Some(cwd.join(dir)),
                _ => None,
            },
        };
    }

    /// Walks a nested list (`$(…)`, `<(…)`) one level deeper and names what it runs.
    fn nested_list(
        &mut self,
        list: &ast::CompoundList,
        depth: usize,
    ) -> Result<Vec<Producer>, ParseFailure> {
        if depth + 1 > MAX_NESTING {
            return Err(ParseFailure::TooDeep);
        }
        let start = self.script.invocations.len();
        let saved_cwd = self.scope.cwd.clone();
        self.compound_list(list, depth + 1, &[])?;
        self.scope.cwd = saved_cwd;
        Ok(self.producers_since(start))
    }

    fn nested_text(&mut self, text: &str, depth: usize) -> Result<Vec<Producer>, ParseFailure> {
        let start = self.script.invocations.len();
        let saved_cwd = self.scope.cwd.clone();
        self.program(text, depth + 1, &[])?;
        self.scope.cwd = saved_cwd;
        Ok(self.producers_since(start))
    }

    fn producers_since(&self, start: usize) -> Vec<Producer> {
        self.script.invocations[start..]
            .iter()
            .flat_map(|inv| {
                producer_of(inv)
                    .into_iter()
                    .chain(inv.words.iter().flat_map(|w| w.producers.iter().cloned()))
            })
            .collect()
    }

    fn redirect(&mut self, redirect: &IoRedirect, depth: usize) -> Result<Redirect, ParseFailure> {
        use ast::{IoFileRedirectKind as K, IoFileRedirectTarget as T};
        let (kind, operator, target) = match redirect {
            IoRedirect::File(_, kind, target) => {
                let (kind, operator) = match kind {
                    K::Read => (RedirectKind::Read, "<"),
                    K::Write => (RedirectKind::Write, ">"),
                    K::Append => (RedirectKind::Write, ">>"),
                    K::Clobber => (RedirectKind::Write, ">|"),
                    K::ReadAndWrite => (RedirectKind::ReadWrite, "<>"),
                    K::DuplicateInput => (RedirectKind::Duplicate, "<&"),
                    K::DuplicateOutput => (RedirectKind::Duplicate, ">&"),
                };
                let target = match target {
                    T::Filename(w) | T::Duplicate(w) => self.word(&w.value, depth)?,
                    T::Fd(fd) => literal_word(&fd.to_string()),
                    T::ProcessSubstitution(_, sub) => {
                        let producers = self.nested_list(&sub.list, depth)?;
                        Word {
                            raw: "<(…)".to_owned(),
                            value: None,
                            known_tail: String::new(),
                            pattern: false,
                            expanded: true,
                            guess: None,
                            producers,
                        }
                    }
                };
                (kind, operator, target)
            }
            IoRedirect::HereDocument(_, doc) => {
                let mut word = if doc.requires_expansion {
                    self.heredoc(&doc.doc.value, depth)?
                } else {
                    literal_word(&doc.doc.value)
                };
                word.raw = doc.doc.value.clone();
                (RedirectKind::HereText, "<<", word)
            }
            IoRedirect::HereString(_, w) => {
                (RedirectKind::HereText, "<<<", self.word(&w.value, depth)?)
            }
            IoRedirect::OutputAndError(w, append) => (
                RedirectKind::Write,
                if *append { "&>>" } else { "&>" },
                self.word(&w.value, depth)?,
            ),
        };
        Ok(Redirect {
            kind,
            operator,
            target,
        })
    }
}

/// What a command contributes as a producer: its literal name and arguments.
fn producer_of(inv: &Invocation) -> Option<Producer> {
    let name = inv.words.first()?.value.clone()?;
    Some(Producer {
        name: basename(&name).to_owned(),
        args: inv
            .words
            .iter()
            .skip(1)
            .map(|w| w.shown().to_owned())
            .collect(),
    })
}

pub fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}
