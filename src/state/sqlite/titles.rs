//! Session titles: sanitising, uniqueness with the compression-ancestor exception, and
//! `"name #N"` lineage numbering.

use rusqlite::{Connection, OptionalExtension, params};

use super::capabilities::Capabilities;
use crate::state::error::{StoreError, StoreResult};
use crate::state::model::TitleSource;

pub const MAX_TITLE_LENGTH: usize = 100;

fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{200B}'..='\u{200F}' | '\u{2028}'..='\u{202E}' | '\u{2060}'..='\u{2069}'
        | '\u{FEFF}' | '\u{FFFC}' | '\u{FFF9}'..='\u{FFFB}')
}

/// Cleans a title as Hermes does; `None` when nothing is left (which clears the title).
pub fn sanitize_title(raw: &str) -> StoreResult<Option<String>> {
    let cleaned: String = raw
        .chars()
        .filter(|c| !c.is_ascii_control() || matches!(c, '\t' | '\n' | '\r'))
        .filter(|c| !is_invisible(*c))
        .collect();
    let collapsed = cleaned.split_whitespace().collect::<Vec<_>>().join(" ");
    if collapsed.is_empty() {
        return Ok(None);
    }
    let length = collapsed.chars().count();
    if length > MAX_TITLE_LENGTH {
        return Err(StoreError::Invalid(format!(
            "Title too long ({length} chars, max {MAX_TITLE_LENGTH})"
        )));
    }
    Ok(Some(collapsed))
}

/// Escapes `%`, `_` and `\` for a `LIKE ... ESCAPE '\'` pattern.
pub fn escape_like(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Is `ancestor` on the parent chain of `session_id`?
fn is_ancestor(conn: &Connection, ancestor: &str, session_id: &str) -> StoreResult<bool> {
    let found: Option<i64> = conn
        .query_row(
            "WITH RECURSIVE chain(id, parent, depth) AS (
                 SELECT id, parent_session_id, 0 FROM sessions WHERE id = ?1
                 UNION ALL
                 SELECT s.id, s.parent_session_id, c.depth + 1 FROM sessions s
                 JOIN chain c ON s.id = c.parent WHERE c.depth < 1000)
             SELECT 1 FROM chain WHERE id = ?2 AND depth > 0 LIMIT 1",
            params![session_id, ancestor],
            |r| r.get(0),
        )
        .optional()?;
    Ok(found.is_some())
}

/// Sets (or with `None`, clears) a session's title inside the writer's transaction, with its
/// provenance where the schema records it. A title held by a compression ancestor moves to
/// this session.
pub fn set_title(
    conn: &Connection,
    caps: &Capabilities,
    session_id: &str,
    raw: Option<&str>,
    source: TitleSource,
) -> StoreResult<()> {
    let title = match raw {
        Some(raw) => sanitize_title(raw)?,
        None => None,
    };
    if let Some(title) = &title {
        let holder: Option<String> = conn
            .query_row(
                "SELECT id FROM sessions WHERE title = ?1 AND id != ?2",
                params![title, session_id],
                |r| r.get(0),
            )
            .optional()?;
        if let Some(holder) = holder {
            if !is_ancestor(conn, &holder, session_id)? {
                return Err(StoreError::TitleInUse {
                    title: title.clone(),
                    holder,
                });
            }
            conn.execute(
                "UPDATE sessions SET title = NULL WHERE id = ?1",
                params![holder],
            )?;
        }
    }
    let changed = if caps.title_source {
        conn.execute(
            "UPDATE sessions SET title = ?1, title_source = CASE WHEN ?1 IS NULL THEN NULL ELSE ?3 END \
             WHERE id = ?2",
            params![title, session_id, source.as_str()],
        )?
    } else {
        conn.execute(
            "UPDATE sessions SET title = ?1 WHERE id = ?2",
            params![title, session_id],
        )?
    };
    if changed == 0 {
        return Err(StoreError::SessionNotFound(session_id.to_owned()));
    }
    Ok(())
}

/// Strips a trailing `" #N"`.
pub(crate) fn base_title(title: &str) -> &str {
    if let Some((base, number)) = title.rsplit_once(" #")
        && !number.is_empty()
        && number.chars().all(|c| c.is_ascii_digit())
    {
        return base;
    }
    title
}

fn numbered_variants(conn: &Connection, base: &str) -> StoreResult<Vec<(String, u64)>> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, title FROM sessions WHERE title = ?1 OR title LIKE ?2 ESCAPE '\\'
         ORDER BY started_at DESC",
    )?;
    let pattern = format!("{} #%", escape_like(base));
    let rows = stmt.query_map(params![base, pattern], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (id, title) = row?;
        if let Some(number) = variant_number(&title, base) {
            out.push((id, number));
        }
    }
    Ok(out)
}

/// `title`'s number in the lineage of `base`: 1 for `base` itself, N for `"base #N"`.
pub(crate) fn variant_number(title: &str, base: &str) -> Option<u64> {
    if title == base {
        return Some(1);
    }
    title
        .strip_prefix(base)
        .and_then(|rest| rest.strip_prefix(" #"))
        .and_then(|n| n.parse::<u64>().ok())
}

/// The next title in a lineage: `base` if unused, else `"base #<max+1>"`.
pub fn next_title_in_lineage(conn: &Connection, title: &str) -> StoreResult<String> {
    let base = base_title(title.trim());
    let variants = numbered_variants(conn, base)?;
    Ok(next_title(base, &variants))
}

/// `base` if no session holds a title of its lineage, else `"base #<max+1>"`.
pub(crate) fn next_title(base: &str, variants: &[(String, u64)]) -> String {
    match variants.iter().map(|(_, n)| *n).max() {
        None => base.to_owned(),
        Some(max) => format!("{base} #{}", max + 1),
    }
}

/// The newest numbered variant of `title` if any exists, else the exact match.
pub fn resolve_by_title(conn: &Connection, title: &str) -> StoreResult<Option<String>> {
    Ok(newest_variant(numbered_variants(conn, title)?))
}

/// Of the variants (newest first), the newest numbered one, else the bare original.
pub(crate) fn newest_variant(variants: Vec<(String, u64)>) -> Option<String> {
    if let Some((id, _)) = variants.iter().find(|(_, n)| *n > 1) {
        return Some(id.clone());
    }
    variants.into_iter().next().map(|(id, _)| id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitises_like_hermes() {
        assert_eq!(
            sanitize_title("  Fix\u{200B}  Docker\tBuild\u{0007} ").unwrap(),
            Some("Fix Docker Build".into())
        );
        assert_eq!(sanitize_title(" \u{FEFF} ").unwrap(), None);
        let long = "x".repeat(101);
        let err = sanitize_title(&long).unwrap_err().to_string();
        assert_eq!(err, "Title too long (101 chars, max 100)");
        assert!(sanitize_title(&"é".repeat(100)).unwrap().is_some());
    }

    #[test]
    fn base_title_strips_numbers_only() {
        assert_eq!(base_title("Fix #2"), "Fix");
        assert_eq!(base_title("Fix #x"), "Fix #x");
        assert_eq!(base_title("Issue #"), "Issue #");
        assert_eq!(escape_like("50%_a\\"), "50\\%\\_a\\\\");
    }
}
