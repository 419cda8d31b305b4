//! Session titles on PostgreSQL: the rules of `state/titles.rs` (sanitising, uniqueness with
//! the compression-ancestor exception, `"name #N"` lineage numbering) over a pool.
//!
//! Several instances may set titles at once. A transaction setting a title first takes a
//! transaction-scoped advisory lock on the title's hash, so the holder check and the update
//! cannot interleave with another instance's (the unique index would otherwise turn the
//! race into a bare constraint error instead of `TitleInUse`).

use sqlx::Row;
use sqlx::postgres::PgPool;

use super::extras::Extras;
use super::rows::db;
use super::tx::PgTx;
use crate::state::error::{StoreError, StoreResult};
use crate::state::model::TitleSource;
use crate::state::sqlite::titles::{
    base_title, escape_like, newest_variant, next_title, sanitize_title, variant_number,
};

/// Is `ancestor` on the parent chain of `session_id`?
async fn is_ancestor(tx: &mut PgTx, ancestor: &str, session_id: &str) -> StoreResult<bool> {
    let found = sqlx::query(
        "WITH RECURSIVE chain(id, parent, depth) AS ( \
             SELECT id, parent_session_id, 0 FROM sessions WHERE id = $1 \
             UNION ALL \
             SELECT s.id, s.parent_session_id, c.depth + 1 FROM sessions s \
             JOIN chain c ON s.id = c.parent WHERE c.depth < 1000) \
         SELECT 1 FROM chain WHERE id = $2 AND depth > 0 LIMIT 1",
    )
    .bind(session_id)
    .bind(ancestor)
    .fetch_optional(&mut **tx)
    .await
    .map_err(db)?;
    Ok(found.is_some())
}

/// Sets (or with `None`, clears) a session's title inside the write's transaction. A title
/// held by a compression ancestor moves to this session.
pub async fn set_title(
    tx: &mut PgTx,
    session_id: &str,
    raw: Option<&str>,
    extras: &Extras,
    source: TitleSource,
) -> StoreResult<()> {
    let title = match raw {
        Some(raw) => sanitize_title(raw)?,
        None => None,
    };
    if let Some(title) = &title {
        sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
            .bind(title)
            .execute(&mut **tx)
            .await
            .map_err(db)?;
        let holder: Option<String> =
            sqlx::query("SELECT id FROM sessions WHERE title = $1 AND id <> $2")
                .bind(title)
                .bind(session_id)
                .fetch_optional(&mut **tx)
                .await
                .map_err(db)?
                .map(|row| row.try_get(0))
                .transpose()
                .map_err(db)?;
        if let Some(holder) = holder {
            if !is_ancestor(tx, &holder, session_id).await? {
                return Err(StoreError::TitleInUse {
                    title: title.clone(),
                    holder,
                });
            }
            sqlx::query("UPDATE sessions SET title = NULL WHERE id = $1")
                .bind(&holder)
                .execute(&mut **tx)
                .await
                .map_err(db)?;
        }
    }
    // Where Hermes records who gave a title, a cleared title has no source.
    let sql = if extras.title_source {
        "UPDATE sessions SET title = $1, \
             title_source = CASE WHEN $1::text IS NULL THEN NULL ELSE $3 END WHERE id = $2"
    } else {
        "UPDATE sessions SET title = $1 WHERE id = $2"
    };
    let mut update = sqlx::query(sql).bind(&title).bind(session_id);
    if extras.title_source {
        update = update.bind(source.as_str());
    }
    let done = update.execute(&mut **tx).await.map_err(db)?;
    if done.rows_affected() == 0 {
        return Err(StoreError::SessionNotFound(session_id.to_owned()));
    }
    Ok(())
}

/// Sessions titled `base` or `"base #N"`, newest first, with their number.
async fn numbered_variants(pool: &PgPool, base: &str) -> StoreResult<Vec<(String, u64)>> {
    let rows = sqlx::query(
        "SELECT id, title FROM sessions WHERE title = $1 OR title LIKE $2 ESCAPE '\\' \
         ORDER BY started_at DESC",
    )
    .bind(base)
    .bind(format!("{} #%", escape_like(base)))
    .fetch_all(super::retried(pool))
    .await
    .map_err(db)?;
    let mut out = Vec::new();
    for row in rows {
        let id: String = row.try_get(0).map_err(db)?;
        let title: String = row.try_get(1).map_err(db)?;
        if let Some(number) = variant_number(&title, base) {
            out.push((id, number));
        }
    }
    Ok(out)
}

/// The next title in a lineage: `base` if unused, else `"base #<max+1>"`.
pub async fn next_title_in_lineage(pool: &PgPool, title: &str) -> StoreResult<String> {
    let base = base_title(title.trim());
    Ok(next_title(base, &numbered_variants(pool, base).await?))
}

/// The newest numbered variant of `title` if any exists, else the exact match.
pub async fn resolve_by_title(pool: &PgPool, title: &str) -> StoreResult<Option<String>> {
    Ok(newest_variant(numbered_variants(pool, title).await?))
}
