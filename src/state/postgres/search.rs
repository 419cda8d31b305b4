//! Full-text search on PostgreSQL, with the query syntax, routing, filters, paging, context
//! and result shape of `state/search.rs`.
//!
//! A query is routed as on SQLite (`search::plan`): text without CJK is a word query, answered
//! by PostgreSQL's full-text search (`to_tsvector('simple', …)`: words lower-cased, not
//! stemmed, like FTS5's `unicode61`) through an expression GIN index (migration 0002); CJK
//! queries of 3 or more characters per term are substring matches (`ILIKE`) through a
//! `pg_trgm` index, as FTS5's trigram table; shorter CJK terms use the same `ILIKE` over the
//! content, tool name and tool calls, as SQLite's `LIKE` fallback. The searched text of a
//! message is SQLite's: content, tool name and tool-call JSON joined by spaces.
//!
//! Snippets mark matches with `>>>`/`<<<` and cut text with `...`, as FTS5's `snippet()`
//! (made here, `snippet.rs`, with FTS5's idea of a word); word hits are ranked by `ts_rank`
//! (FTS5 uses bm25), substring hits newest first.

use sqlx::postgres::{PgArguments, PgPool, PgRow};
use sqlx::{Arguments, AssertSqlSafe, Row};

use super::pg_text::from_pg;
use super::rows::{self, Columns, db};
use super::search_syntax::{self, Expr};
use super::snippet;
use crate::state::encode::{content_text, decode_content};
use crate::state::error::StoreResult;
use crate::state::model::{ContextLine, SearchHit, SearchQuery};
use crate::state::sqlite::search::{CONTEXT_CHARS, Plan, plan};
use crate::state::sqlite::titles::escape_like;

/// The searched text of a message `m` (SQLite's FTS row: content, tool name, tool calls).
macro_rules! search_text {
    () => {
        "(COALESCE(msg.content, '') || ' ' || COALESCE(msg.tool_name, '') || ' ' \
         || COALESCE(msg.tool_calls, ''))"
    };
}

/// The searched text; the trigram index of migration 0002 is on exactly this expression (a
/// test checks that the planner matches it).
pub const SEARCH_TEXT: &str = search_text!();

/// The searched text's words: ASCII punctuation becomes spaces first (as FTS5's `unicode61`
/// separates words at it, where PostgreSQL's parser would keep `github.com` or `a_b` whole),
/// diacritics are removed (`unicode61`'s `remove_diacritics`: `cafe` finds `café`), then the
/// `simple` configuration lower-cases without stemming. The word index of migration
/// 0002 is on exactly this expression. The punctuation is `search_syntax::PUNCTUATION`.
///
/// Only the first 100,000 characters count: a `tsvector` cannot exceed 1 MB, and a longer
/// text of many different words (a large tool output) would otherwise make its insert fail.
/// (SQLite indexes everything; a word past that point is found there but not here.)
pub const SEARCH_WORDS: &str = concat!(
    "to_tsvector('simple'::regconfig, regexp_replace(normalize(translate(left(",
    search_text!(),
    ", 100000), '!\"#$%&''()*+,-./:;<=>?@[\\]^_`{|}~', '                                '), NFD), ",
    "'[\\u0300-\\u036f]', '', 'g'))"
);

const DOC: &str = SEARCH_TEXT;

/// The hit columns every plan selects, in the order [`hit`] reads them; then the searched
/// text (and the content), for the snippet.
const HIT_COLUMNS: &str = "msg.id, msg.session_id, msg.role, msg.timestamp, msg.tool_name, sess.source, sess.model, sess.started_at";

/// SQLSTATE `syntax_error`, which PostgreSQL also reports for text it cannot read as a query.
const SYNTAX_ERROR: &str = "42601";

/// Searches messages; an empty query, or one the database cannot parse, returns no hits; a
/// search the database cannot run is an error.
pub async fn search(pool: &PgPool, q: &SearchQuery) -> StoreResult<Vec<SearchHit>> {
    let Some(plan) = plan(&q.query) else {
        return Ok(Vec::new());
    };
    let found = match &plan {
        Plan::Words(query) => match search_syntax::parse(query) {
            Some(expr) => words(pool, q, &expr).await,
            None => return Ok(Vec::new()),
        },
        Plan::Trigram(query) => {
            match search_syntax::parse(query).and_then(search_syntax::without_short_terms) {
                Some(expr) => substrings(pool, q, Substrings::Trigram(&expr)).await,
                None => return Ok(Vec::new()),
            }
        }
        Plan::Like(terms) => substrings(pool, q, Substrings::Like(terms)).await,
    };
    let mut hits = match found {
        Ok(hits) => hits,
        // As on SQLite, query text the database cannot parse means "no results"; any other
        // refusal (a missing table or index, a broken extension) is an error the caller sees.
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some(SYNTAX_ERROR) => {
            tracing::debug!(error = %e, "search query not understood");
            return Ok(Vec::new());
        }
        Err(sqlx::Error::Database(e)) => {
            tracing::warn!(error = %e, "search failed");
            return Err(crate::state::StoreError::SearchFailed {
                index: "messages (PostgreSQL)".into(),
                message: e.to_string(),
            });
        }
        Err(e) => return Err(db(e)),
    };
    for hit in &mut hits {
        hit.context = context_of(pool, hit).await?;
    }
    Ok(hits)
}

/// The filters of every plan, on parameters `$first..$first+2`.
fn filters(first: usize) -> String {
    format!(
        "(cardinality(${a}::text[]) = 0 OR sess.source = ANY(${a})) \
         AND NOT (sess.source = ANY(${b}::text[])) \
         AND (cardinality(${c}::text[]) = 0 OR msg.role = ANY(${c}))",
        a = first,
        b = first + 1,
        c = first + 2
    )
}

fn bind_filters(args: &mut PgArguments, q: &SearchQuery) -> Result<(), sqlx::Error> {
    args.add(&q.source_filter).map_err(sqlx::Error::Encode)?;
    args.add(&q.exclude_sources).map_err(sqlx::Error::Encode)?;
    args.add(&q.role_filter).map_err(sqlx::Error::Encode)?;
    args.add(q.limit as i64).map_err(sqlx::Error::Encode)?;
    args.add(q.offset as i64).map_err(sqlx::Error::Encode)?;
    Ok(())
}

fn hit(r: &PgRow, snippet: String) -> Result<SearchHit, sqlx::Error> {
    Ok(SearchHit {
        id: r.try_get(0)?,
        session_id: r.text_or_empty(1)?,
        role: r.text_or_empty(2)?,
        snippet,
        timestamp: r.try_get::<Option<f64>, _>(3)?.unwrap_or(0.0),
        tool_name: r.text(4)?,
        source: r.text_or_empty(5)?,
        model: r.text(6)?,
        session_started: r.try_get::<Option<f64>, _>(7)?.unwrap_or(0.0),
        context: Vec::new(),
    })
}

/// How many of the newest matches a word query ranks (at least; more when a page reaches
/// past them). `ts_rank` needs each candidate's words computed again, about 0.25 ms each, so
/// ranking every match of a common word would take seconds where the index finds them in
/// milliseconds; FTS5's bm25 ranks all matches, so ranks past this many newest matches may
/// differ from SQLite's.
const RANKED_CANDIDATES: usize = 1000;

/// A word query: `@@` against the expression index; the newest matches ranked by `ts_rank`,
/// best first.
async fn words(pool: &PgPool, q: &SearchQuery, expr: &Expr) -> Result<Vec<SearchHit>, sqlx::Error> {
    let sql = format!(
        "SELECT c.id, c.session_id, c.role, c.timestamp, c.tool_name, c.source, c.model, \
                c.started_at, c.doc \
         FROM (SELECT {HIT_COLUMNS}, {DOC} AS doc, {SEARCH_WORDS} AS words \
               FROM messages msg JOIN sessions sess ON sess.id = msg.session_id, \
                    to_tsquery('simple', $1) AS query \
               WHERE {SEARCH_WORDS} @@ query AND {filters} \
               ORDER BY msg.id DESC LIMIT $7) c, \
              to_tsquery('simple', $1) AS query \
         ORDER BY ts_rank(c.words, query) DESC, c.id DESC LIMIT $5 OFFSET $6",
        filters = filters(2),
    );
    let mut args = PgArguments::default();
    args.add(search_syntax::to_tsquery(expr))
        .map_err(sqlx::Error::Encode)?;
    bind_filters(&mut args, q)?;
    let candidates = RANKED_CANDIDATES.max(q.offset + q.limit);
    args.add(candidates as i64).map_err(sqlx::Error::Encode)?;
    let found = sqlx::query_with(AssertSqlSafe(sql), args)
        .fetch_all(super::retried(pool))
        .await?;
    let terms = search_syntax::positive_terms(expr);
    found
        .iter()
        .map(|r| {
            let doc = from_pg(r.try_get(8)?);
            hit(r, snippet::words(&doc, &terms))
        })
        .collect()
}

/// A substring query, answered with `ILIKE` (a trigram index serves the searched text).
enum Substrings<'a> {
    /// CJK terms of 3 or more characters (FTS5's trigram table): matched in the searched text,
    /// combined as the query says; the snippet marks them.
    Trigram(&'a Expr),
    /// Shorter CJK terms (SQLite's `LIKE` fallback): any term in the content, tool name or
    /// tool calls; the snippet is the content around the first term, unmarked.
    Like(&'a [String]),
}

async fn substrings(
    pool: &PgPool,
    q: &SearchQuery,
    how: Substrings<'_>,
) -> Result<Vec<SearchHit>, sqlx::Error> {
    let mut args = PgArguments::default();
    let mut next = 1;
    let matcher = match &how {
        Substrings::Trigram(expr) => trigram_matcher(expr, &mut args, &mut next)?,
        Substrings::Like(terms) => {
            let mut clauses = Vec::new();
            for term in terms.iter() {
                args.add(format!("%{}%", escape_like(term)))
                    .map_err(sqlx::Error::Encode)?;
                clauses.push(format!(
                    "(msg.content ILIKE ${next} ESCAPE '\\' OR msg.tool_name ILIKE ${next} ESCAPE '\\' \
                     OR msg.tool_calls ILIKE ${next} ESCAPE '\\')"
                ));
                next += 1;
            }
            format!("({})", clauses.join(" OR "))
        }
    };
    bind_filters(&mut args, q)?;
    let sql = format!(
        "SELECT {HIT_COLUMNS}, {DOC}, msg.content \
         FROM messages msg JOIN sessions sess ON sess.id = msg.session_id \
         WHERE {matcher} AND {filters} ORDER BY msg.id DESC LIMIT ${limit} OFFSET ${offset}",
        filters = filters(next),
        limit = next + 3,
        offset = next + 4,
    );
    let found = sqlx::query_with(AssertSqlSafe(sql), args)
        .fetch_all(super::retried(pool))
        .await?;
    found
        .iter()
        .map(|r| {
            let snippet = match &how {
                Substrings::Trigram(expr) => {
                    let doc = from_pg(r.try_get(8)?);
                    let terms = search_syntax::positive_terms(expr);
                    let texts: Vec<&str> = terms.iter().map(|(text, _)| *text).collect();
                    snippet::marked(&doc, &texts)
                }
                Substrings::Like(terms) => {
                    let content: Option<String> = r.try_get(9)?;
                    snippet::around(&content.map(from_pg).unwrap_or_default(), &terms[0])
                }
            };
            hit(r, snippet)
        })
        .collect()
}

/// The SQL condition of a trigram query, its terms bound as `ILIKE` patterns from `$next` on.
fn trigram_matcher(
    expr: &Expr,
    args: &mut PgArguments,
    next: &mut usize,
) -> Result<String, sqlx::Error> {
    let mut join = |parts: &[Expr], op: &str, args: &mut PgArguments| {
        let mut out = Vec::new();
        for part in parts {
            out.push(trigram_matcher(part, args, next)?);
        }
        Ok::<_, sqlx::Error>(format!("({})", out.join(op)))
    };
    match expr {
        Expr::Term { text, .. } => {
            args.add(format!("%{}%", escape_like(text)))
                .map_err(sqlx::Error::Encode)?;
            let sql = format!("{DOC} ILIKE ${} ESCAPE '\\'", *next);
            *next += 1;
            Ok(sql)
        }
        Expr::And(parts) => join(parts, " AND ", args),
        Expr::Or(parts) => join(parts, " OR ", args),
        Expr::Not(left, right) => {
            let left = trigram_matcher(left, args, next)?;
            let right = trigram_matcher(right, args, next)?;
            Ok(format!("({left} AND NOT {right})"))
        }
    }
}

/// The previous message, the match and the next message, each cut to 200 characters.
async fn context_of(pool: &PgPool, hit: &SearchHit) -> StoreResult<Vec<ContextLine>> {
    let found = sqlx::query(
        "SELECT role, content FROM ( \
             (SELECT 0 AS k, role, content FROM messages \
              WHERE session_id = $1 AND id < $2 ORDER BY id DESC LIMIT 1) \
             UNION ALL (SELECT 1, role, content FROM messages WHERE id = $2) \
             UNION ALL (SELECT 2, role, content FROM messages \
              WHERE session_id = $1 AND id > $2 ORDER BY id LIMIT 1)) lines ORDER BY k",
    )
    .bind(&hit.session_id)
    .bind(hit.id)
    .fetch_all(super::retried(pool))
    .await
    .map_err(db)?;
    rows::all(&found, |r| {
        let content = content_text(&decode_content(r.encoded(1)?));
        Ok(ContextLine {
            role: r.text_or_empty(0)?,
            content: content.chars().take(CONTEXT_CHARS).collect(),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_indexed_words_split_at_exactly_the_query_punctuation() {
        let literal = format!(
            "'{}', '{}'",
            search_syntax::PUNCTUATION.replace('\'', "''"),
            " ".repeat(search_syntax::PUNCTUATION.len())
        );
        assert!(SEARCH_WORDS.contains(&literal), "{SEARCH_WORDS}");
        assert!(SEARCH_WORDS.contains(SEARCH_TEXT));
    }
}
