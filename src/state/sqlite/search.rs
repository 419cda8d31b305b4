//! Full-text search over messages: the Hermes FTS5 query sanitiser, the word index, the
//! trigram index for CJK queries of three or more characters, and a LIKE fallback below that.

use std::sync::LazyLock;

use regex::Regex;
use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, params_from_iter};

use crate::state::encode::{content_text, decode_content, text, text_or_empty};
use crate::state::error::StoreResult;
use crate::state::model::{ContextLine, SearchHit, SearchQuery};
use crate::state::sqlite::read::active_filter;
use crate::state::sqlite::schema::SchemaInfo;

pub const MAX_FTS5_QUERY_CHARS: usize = 2048;
pub(crate) const CONTEXT_CHARS: usize = 200;

static QUOTED: LazyLock<Regex> = LazyLock::new(|| Regex::new(r#""[^"]*""#).expect("regex"));
static SPECIAL: LazyLock<Regex> = LazyLock::new(|| Regex::new(r#"[+{}():"^]"#).expect("regex"));
static STARS: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\*+").expect("regex"));
static LEADING_STAR: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(^|\s)\*").expect("regex"));
static LEADING_OP: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^(AND|OR|NOT)\b\s*").expect("regex"));
static TRAILING_OP: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)\s+(AND|OR|NOT)\s*$").expect("regex"));
static COMPOUND: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b(\w+(?:[._-]\w+)+)\b").expect("regex"));

/// Makes arbitrary user input a valid FTS5 query, exactly as Hermes's `_sanitize_fts5_query`.
pub fn sanitize_fts5_query(query: &str) -> String {
    let truncated: String = query.chars().take(MAX_FTS5_QUERY_CHARS).collect();
    let mut phrases = Vec::new();
    let protected = QUOTED.replace_all(&truncated, |caps: &regex::Captures<'_>| {
        phrases.push(caps[0].to_owned());
        format!("\u{0}Q{}\u{0}", phrases.len() - 1)
    });
    let cleaned = SPECIAL.replace_all(&protected, " ");
    let cleaned = STARS.replace_all(&cleaned, "*");
    let cleaned = LEADING_STAR.replace_all(&cleaned, "$1");
    let cleaned = LEADING_OP.replace(cleaned.trim(), "").into_owned();
    let cleaned = TRAILING_OP.replace(cleaned.trim(), "").into_owned();
    let mut result = COMPOUND.replace_all(&cleaned, "\"$1\"").into_owned();
    for (i, phrase) in phrases.iter().enumerate() {
        result = result.replace(&format!("\u{0}Q{i}\u{0}"), phrase);
    }
    result.trim().to_owned()
}

/// The code points Hermes counts as CJK (ideographs, symbols, kana, hangul syllables).
fn is_cjk(c: char) -> bool {
    matches!(c,
        '\u{4E00}'..='\u{9FFF}' | '\u{3400}'..='\u{4DBF}' | '\u{20000}'..='\u{2A6DF}'
        | '\u{3000}'..='\u{303F}' | '\u{3040}'..='\u{309F}' | '\u{30A0}'..='\u{30FF}'
        | '\u{AC00}'..='\u{D7AF}')
}

fn cjk_count(s: &str) -> usize {
    s.chars().filter(|c| is_cjk(*c)).count()
}

fn is_operator(token: &str) -> bool {
    matches!(token.to_ascii_uppercase().as_str(), "AND" | "OR" | "NOT")
}

/// How a query will be answered.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Plan {
    Words(String),
    Trigram(String),
    Like(Vec<String>),
}

/// Routes a query as Hermes does: no CJK → sanitised word query; ≥ 3 CJK characters with no
/// CJK token shorter than 3 → trigram (tokens quoted, operators kept); otherwise LIKE.
pub(crate) fn plan(query: &str) -> Option<Plan> {
    if cjk_count(query) == 0 {
        let sanitized = sanitize_fts5_query(query);
        return (!sanitized.is_empty()).then_some(Plan::Words(sanitized));
    }
    let raw = query.trim_matches('"').trim();
    let tokens: Vec<&str> = raw.split_whitespace().collect();
    let any_short_cjk = tokens
        .iter()
        .filter(|t| !is_operator(t) && cjk_count(t) > 0)
        .any(|t| cjk_count(t) < 3);
    if cjk_count(raw) >= 3 && !any_short_cjk {
        let quoted: Vec<String> = tokens
            .iter()
            .map(|t| {
                if is_operator(t) {
                    t.to_ascii_uppercase()
                } else {
                    format!("\"{}\"", t.replace('"', "\"\""))
                }
            })
            .collect();
        return Some(Plan::Trigram(quoted.join(" ")));
    }
    let mut terms: Vec<String> = tokens
        .iter()
        .filter(|t| !is_operator(t))
        .map(|t| t.to_string())
        .collect();
    if terms.is_empty() {
        terms.push(raw.to_owned());
    }
    Some(Plan::Like(terms))
}

fn in_list(column: &str, values: &[String], negate: bool, params: &mut Vec<SqlValue>) -> String {
    if values.is_empty() {
        return String::new();
    }
    let marks = vec!["?"; values.len()].join(", ");
    params.extend(values.iter().map(|v| SqlValue::Text(v.clone())));
    let not = if negate { "NOT " } else { "" };
    format!(" AND {column} {not}IN ({marks})")
}

/// Searches messages; an empty query, or one FTS5 cannot parse, returns no hits; a search the
/// index cannot run (a missing table, a tokenizer this process lacks) is `SearchFailed`.
pub fn search(
    conn: &Connection,
    info: &SchemaInfo,
    q: &SearchQuery,
) -> StoreResult<Vec<SearchHit>> {
    let Some(plan) = plan(&q.query) else {
        return Ok(Vec::new());
    };
    let mut params: Vec<SqlValue> = Vec::new();
    let (from, matcher, snippet, order) = match &plan {
        Plan::Words(query) | Plan::Trigram(query) => {
            let table = if matches!(plan, Plan::Words(_)) {
                "messages_fts"
            } else {
                "messages_fts_trigram"
            };
            params.push(SqlValue::Text(query.clone()));
            (
                format!("{table} JOIN messages m ON m.id = {table}.rowid"),
                format!("{table} MATCH ?"),
                format!("snippet({table}, 0, '>>>', '<<<', '...', 40)"),
                "rank".to_owned(),
            )
        }
        Plan::Like(terms) => {
            let mut clauses = Vec::new();
            for term in terms {
                let pattern = format!("%{}%", crate::state::sqlite::titles::escape_like(term));
                clauses.push(
                    "(m.content LIKE ? ESCAPE '\\' OR m.tool_name LIKE ? ESCAPE '\\' \
                     OR m.tool_calls LIKE ? ESCAPE '\\')",
                );
                for _ in 0..3 {
                    params.push(SqlValue::Text(pattern.clone()));
                }
            }
            let first = SqlValue::Text(terms[0].clone());
            params.insert(0, first);
            // Newest first by insertion order: the scan stops after `limit` hits.
            (
                "messages m".to_owned(),
                format!("({})", clauses.join(" OR ")),
                "substr(m.content, max(1, instr(m.content, ?) - 40), 120)".to_owned(),
                "m.id DESC".to_owned(),
            )
        }
    };
    let mut filters = active_filter(info).to_owned();
    filters += &in_list("s.source", &q.source_filter, false, &mut params);
    filters += &in_list("s.source", &q.exclude_sources, true, &mut params);
    filters += &in_list("m.role", &q.role_filter, false, &mut params);
    params.push(SqlValue::Integer(q.limit as i64));
    params.push(SqlValue::Integer(q.offset as i64));
    let sql = format!(
        "SELECT m.id, m.session_id, m.role, {snippet}, m.timestamp, m.tool_name,
                s.source, s.model, s.started_at
         FROM {from} JOIN sessions s ON s.id = m.session_id
         WHERE {matcher}{filters} ORDER BY {order} LIMIT ? OFFSET ?"
    );
    let index = match &plan {
        Plan::Words(_) => "messages_fts",
        Plan::Trigram(_) => "messages_fts_trigram",
        Plan::Like(_) => "messages",
    };
    let mut stmt = conn
        .prepare_cached(&sql)
        .map_err(|e| search_failed(index, &e))?;
    let rows = stmt.query_map(params_from_iter(params), |r| {
        Ok(SearchHit {
            id: r.get(0)?,
            session_id: text_or_empty(r, 1)?,
            role: text_or_empty(r, 2)?,
            snippet: text_or_empty(r, 3)?,
            timestamp: r.get::<_, Option<f64>>(4)?.unwrap_or(0.0),
            tool_name: text(r, 5)?,
            source: text_or_empty(r, 6)?,
            model: text(r, 7)?,
            session_started: r.get::<_, Option<f64>>(8)?.unwrap_or(0.0),
            context: Vec::new(),
        })
    });
    let mut hits: Vec<SearchHit> = match rows.and_then(|rows| rows.collect()) {
        Ok(hits) => hits,
        // An FTS5 syntax error after sanitising means "no results", as in Hermes; anything
        // else (a missing table, a tokenizer this process lacks, I/O) is an error.
        Err(e) if is_query_syntax_error(&e) => {
            tracing::debug!(error = %e, "search query not understood by the index");
            return Ok(Vec::new());
        }
        Err(e) => return Err(search_failed(index, &e)),
    };
    for hit in &mut hits {
        hit.context = context_of(conn, info, hit)?;
    }
    Ok(hits)
}

/// FTS5's complaint about the query text itself, as opposed to the index or the database.
fn is_query_syntax_error(e: &rusqlite::Error) -> bool {
    let text = e.to_string();
    text.contains("fts5: syntax error") || text.contains("unterminated string")
}

/// The search error the caller sees, logged once here.
fn search_failed(index: &str, e: &rusqlite::Error) -> crate::state::StoreError {
    tracing::warn!(index, error = %e, "search failed");
    crate::state::StoreError::SearchFailed {
        index: index.to_owned(),
        message: e.to_string(),
    }
}

/// The previous message, the match and the next message, each truncated to 200 characters.
fn context_of(
    conn: &Connection,
    info: &SchemaInfo,
    hit: &SearchHit,
) -> StoreResult<Vec<ContextLine>> {
    let filter = active_filter(info);
    let sql = format!(
        "SELECT role, content FROM (
             SELECT m.id, m.role, m.content FROM messages m
             WHERE m.session_id = ?1 AND m.id < ?2{filter} ORDER BY m.id DESC LIMIT 1)
         UNION ALL SELECT m.role, m.content FROM messages m WHERE m.id = ?2
         UNION ALL SELECT role, content FROM (
             SELECT m.id, m.role, m.content FROM messages m
             WHERE m.session_id = ?1 AND m.id > ?2{filter} ORDER BY m.id LIMIT 1)"
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(rusqlite::params![hit.session_id, hit.id], |r| {
        let content = content_text(&decode_content(text(r, 1)?));
        Ok(ContextLine {
            role: text_or_empty(r, 0)?,
            content: content.chars().take(CONTEXT_CHARS).collect(),
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitiser_matches_the_reference_examples() {
        let cases = [
            ("chat-send P2.2 test", r#""chat-send" "P2.2" test"#),
            ("TODO: fix (this)", "TODO  fix  this"),
            (r#""exact phrase" AND"#, r#""exact phrase""#),
            ("my-app.config.ts", r#""my-app.config.ts""#),
            ("***foo* bar", "foo* bar"),
            ("OR hello", "hello"),
            ("C++ {x}", "C    x"),
            (r#"unbalanced "quote"#, "unbalanced  quote"),
        ];
        for (input, expected) in cases {
            assert_eq!(sanitize_fts5_query(input), expected, "input {input:?}");
        }
        assert_eq!(sanitize_fts5_query(&"a".repeat(3000)).len(), 2048);
    }

    #[test]
    fn cjk_queries_pick_trigram_or_like() {
        assert_eq!(plan("部署环境"), Some(Plan::Trigram("\"部署环境\"".into())));
        assert_eq!(
            plan("数据库 or 部署环境"),
            Some(Plan::Trigram("\"数据库\" OR \"部署环境\"".into()))
        );
        assert_eq!(plan("部署"), Some(Plan::Like(vec!["部署".into()])));
        assert_eq!(
            plan("docker 部署环境"),
            Some(Plan::Trigram("\"docker\" \"部署环境\"".into()))
        );
        assert_eq!(
            plan("广西 OR 桂林 OR 漓江"),
            Some(Plan::Like(vec![
                "广西".into(),
                "桂林".into(),
                "漓江".into()
            ]))
        );
        assert_eq!(plan("   "), None);
        assert_eq!(plan("AND"), None);
    }
}
