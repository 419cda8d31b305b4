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
//! Snippets mark matches with `>>>`/`<<<` and cut text with `...`, as FTS5's `snippet()`;
//! word hits are ranked by `ts_rank` (FTS5 uses bm25), substring hits newest first.

use sqlx::postgres::{PgArguments, PgPool, PgRow};
use sqlx::{Arguments, AssertSqlSafe, Row};

use super::pg_text::from_pg;
use super::rows::{self, Columns, db};
use super::search_syntax::{self, Expr};
use super::snippet;
use crate::state::encode::{content_text, decode_content};
use crate::state::error::StoreResult;
use crate::state::model::{ContextLine, SearchHit, SearchQuery};
use crate::state::search::{CONTEXT_CHARS, Plan, plan};
use crate::state::titles::escape_like;

/// The searched text of a message `m`; the indexes of migration 0002 are on exactly this
/// expression (a test checks that the planner matches them).
pub const SEARCH_TEXT: &str = "(COALESCE(m.content, '') || ' ' || COALESCE(m.tool_name, '') \
                               || ' ' || COALESCE(m.tool_calls, ''))";
const DOC: &str = SEARCH_TEXT;

/// The hit columns every plan selects, in the order [`hit`] reads them; then the searched
/// text and the content, for the snippet.
const HIT_COLUMNS: &str =
    "m.id, m.session_id, m.role, m.timestamp, m.tool_name, s.source, s.model, s.started_at";

/// Searches messages; an empty or unusable query returns no hits rather than an error.
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
        // As on SQLite, a query the database refuses means "no results".
        Err(e) => {
            tracing::debug!(error = %e, "search query failed");
            return Ok(Vec::new());
        }
    };
    for hit in &mut hits {
        hit.context = context_of(pool, hit).await?;
    }
    Ok(hits)
}

/// The filters of every plan, on parameters `$first..$first+2`.
fn filters(first: usize) -> String {
    format!(
        "(cardinality(${a}::text[]) = 0 OR s.source = ANY(${a})) \
         AND NOT (s.source = ANY(${b}::text[])) \
         AND (cardinality(${c}::text[]) = 0 OR m.role = ANY(${c}))",
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

/// A word query: `@@` against the expression index, best rank first; the snippet is
/// `ts_headline`'s, computed for the returned page only.
async fn words(pool: &PgPool, q: &SearchQuery, expr: &Expr) -> Result<Vec<SearchHit>, sqlx::Error> {
    let sql = format!(
        "WITH query AS (SELECT to_tsquery('simple', $1) AS q), \
         page AS ( \
             SELECT {HIT_COLUMNS}, {DOC} AS doc, \
                    ts_rank(to_tsvector('simple', {DOC}), query.q) AS rank \
             FROM messages m JOIN sessions s ON s.id = m.session_id, query \
             WHERE to_tsvector('simple', {DOC}) @@ query.q AND {filters} \
             ORDER BY rank DESC, m.id DESC LIMIT $5 OFFSET $6) \
         SELECT page.*, ts_headline('simple', page.doc, query.q, \
                    'StartSel=>>>, StopSel=<<<, MaxWords=40, MinWords=20') \
         FROM page, query ORDER BY page.rank DESC, page.id DESC",
        filters = filters(2),
    );
    let mut args = PgArguments::default();
    args.add(search_syntax::to_tsquery(expr))
        .map_err(sqlx::Error::Encode)?;
    bind_filters(&mut args, q)?;
    let found = sqlx::query_with(AssertSqlSafe(sql), args)
        .fetch_all(pool)
        .await?;
    found
        .iter()
        .map(|r| {
            let doc = from_pg(r.try_get(8)?);
            let headline = from_pg(r.try_get(10)?);
            hit(r, snippet::with_ellipses(&headline, &doc))
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
                    "(m.content ILIKE ${next} ESCAPE '\\' OR m.tool_name ILIKE ${next} ESCAPE '\\' \
                     OR m.tool_calls ILIKE ${next} ESCAPE '\\')"
                ));
                next += 1;
            }
            format!("({})", clauses.join(" OR "))
        }
    };
    bind_filters(&mut args, q)?;
    let sql = format!(
        "SELECT {HIT_COLUMNS}, {DOC}, m.content \
         FROM messages m JOIN sessions s ON s.id = m.session_id \
         WHERE {matcher} AND {filters} ORDER BY m.id DESC LIMIT ${limit} OFFSET ${offset}",
        filters = filters(next),
        limit = next + 3,
        offset = next + 4,
    );
    let found = sqlx::query_with(AssertSqlSafe(sql), args)
        .fetch_all(pool)
        .await?;
    found
        .iter()
        .map(|r| {
            let snippet = match &how {
                Substrings::Trigram(expr) => {
                    let doc = from_pg(r.try_get(8)?);
                    snippet::marked(&doc, &search_syntax::positive_terms(expr))
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
    .fetch_all(pool)
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
