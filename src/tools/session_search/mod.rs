//! `session_search` (Python `tools/session_search_tool.py`) over state.db, with four shapes
//! inferred from the arguments: discover (`query`: FTS with the Hermes sanitiser, one hit per
//! session lineage, ±5 messages plus bookends), scroll (`session_id` + `around_message_id`),
//! read (`session_id`) and browse (nothing). The agent loop calls it with its store.

mod schema;
mod view;

use serde_json::{Value, json};

use super::timefmt::human;
use crate::state::{SearchHit, SearchQuery, Store};
pub use schema::schema;
use view::{anchored_view, session_meta, shape};

/// Sources never shown: delegate sub-agents and third-party tool sessions.
const HIDDEN_SOURCES: [&str; 2] = ["subagent", "tool"];
/// Automation sources ranked below interactive sessions.
const DEMOTED_SOURCES: [&str; 1] = ["cron"];
const DISCOVER_SCAN_LIMIT: usize = 300;

/// The tool's arguments (plus the caller's profile, which is not a model argument).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionSearchArgs {
    pub query: String,
    pub role_filter: Option<String>,
    pub limit: Option<i64>,
    pub session_id: Option<String>,
    pub around_message_id: Option<i64>,
    pub window: Option<i64>,
    pub sort: Option<String>,
    pub profile: Option<String>,
    /// The profile this daemon serves; links naming it are local.
    pub current_profile: Option<String>,
}

impl SessionSearchArgs {
    pub fn from_json(args: &Value) -> Self {
        let text = |k: &str| args.get(k).and_then(Value::as_str).map(str::to_owned);
        let int = |k: &str| match args.get(k) {
            Some(Value::Number(n)) => n.as_i64(),
            Some(Value::String(s)) => s.trim().parse().ok(),
            _ => None,
        };
        Self {
            query: text("query").unwrap_or_default(),
            role_filter: text("role_filter"),
            limit: int("limit"),
            session_id: text("session_id"),
            around_message_id: int("around_message_id"),
            window: int("window"),
            sort: text("sort"),
            profile: text("profile"),
            current_profile: None,
        }
    }
}

fn error(message: impl Into<String>) -> String {
    json!({"error": message.into(), "success": false}).to_string()
}

async fn lineage_root(store: &Store, session_id: &str) -> String {
    let mut current = session_id.to_owned();
    let mut visited = Vec::new();
    while !visited.contains(&current) {
        visited.push(current.clone());
        match store.get_session(&current).await {
            Ok(Some(s)) => match s.parent_session_id.filter(|p| !p.is_empty()) {
                Some(parent) => current = parent,
                None => break,
            },
            _ => break,
        }
    }
    current
}

async fn read_session(store: &Store, session_id: &str) -> String {
    const HEAD: usize = 20;
    const TAIL: usize = 10;
    let Ok(Some(meta)) = store.get_session(session_id).await else {
        return error(format!("session_id not found: {session_id}"));
    };
    let messages = match store.get_messages(session_id).await {
        Ok(m) => m,
        Err(e) => return error(format!("failed to load session: {e}")),
    };
    let total = messages.len();
    let truncated = total > HEAD + TAIL;
    let shown: Vec<Value> = if truncated {
        messages[..HEAD]
            .iter()
            .chain(&messages[total - TAIL..])
            .map(|m| shape(m, None))
            .collect()
    } else {
        messages.iter().map(|m| shape(m, None)).collect()
    };
    let mut result = json!({
        "success": true, "mode": "read", "session_id": session_id,
        "session_meta": session_meta(Some(&meta)), "message_count": total,
        "truncated": truncated, "messages": shown,
    });
    if truncated {
        result["message"] = json!(format!(
            "{total} messages; these are the first {HEAD} and the last {TAIL}. For the rest, call again with around_message_id set to one of these ids."
        ));
    }
    result.to_string()
}

async fn scroll(
    store: &Store,
    session_id: &str,
    anchor: i64,
    window: i64,
    current: Option<&str>,
) -> String {
    let window = window.clamp(1, 20) as usize;
    if let Some(current) = current
        && lineage_root(store, session_id).await == lineage_root(store, current).await
    {
        return error(
            "not scrolled: that message belongs to this conversation, which you already have",
        );
    }
    let Ok(Some(mut meta)) = store.get_session(session_id).await else {
        return error(format!("session_id not found: {session_id}"));
    };
    let mut owner = session_id.to_owned();
    let mut warning = None;
    let mut view = anchored_view(
        &store.get_messages(session_id).await.unwrap_or_default(),
        anchor,
        window,
        None,
    );
    if view.is_none() {
        // The anchor may live in a compressed child of this session: rebind to it.
        for child in store.descendants(session_id).await.unwrap_or_default() {
            let messages = store.get_messages(&child.id).await.unwrap_or_default();
            if let Some(found) = anchored_view(&messages, anchor, window, None) {
                warning = Some(format!(
                    "around_message_id {anchor} lives in {} (child of {session_id}); rebound transparently",
                    child.id
                ));
                if let Ok(Some(child_meta)) = store.get_session(&child.id).await {
                    meta = child_meta;
                }
                owner = child.id.clone();
                view = Some(found);
                break;
            }
        }
    }
    let Some(view) = view.filter(|v| !v.window.is_empty()) else {
        return error(format!(
            "around_message_id {anchor} not in session_id {session_id}"
        ));
    };
    let mut result = json!({
        "success": true, "mode": "scroll", "session_id": owner, "around_message_id": anchor,
        "session_meta": session_meta(Some(&meta)), "window": window, "messages": view.window,
        "messages_before": view.before, "messages_after": view.after,
    });
    if let Some(w) = warning {
        result["warning"] = json!(w);
    }
    result.to_string()
}

async fn browse(store: &Store, limit: usize, current: Option<&str>) -> String {
    let sessions = match store.recent_sessions(None, limit + 50).await {
        Ok(s) => s,
        Err(e) => return error(format!("Failed to list recent sessions: {e}")),
    };
    let current_root = match current {
        Some(c) => Some(lineage_root(store, c).await),
        None => None,
    };
    let mut results = Vec::new();
    for summary in sessions {
        let s = &summary.session;
        if HIDDEN_SOURCES.contains(&s.source.as_str())
            || s.parent_session_id.as_ref().is_some_and(|p| !p.is_empty())
            || current_root.as_deref() == Some(s.id.as_str())
            || current == Some(s.id.as_str())
        {
            continue;
        }
        results.push(json!({
            "session_id": s.id, "title": s.title, "source": s.source, "started_at": s.started_at,
            "last_active": summary.last_active, "message_count": s.message_count, "preview": summary.preview,
        }));
        if results.len() >= limit {
            break;
        }
    }
    json!({
        "success": true, "mode": "browse", "count": results.len(), "results": results,
        "message": format!("The {} latest sessions. Give query to search, or session_id with around_message_id to read one.", results.len()),
    })
    .to_string()
}

async fn discovery_entry(store: &Store, hit: &SearchHit, root: &str) -> Option<Value> {
    let messages = store.get_messages(&hit.session_id).await.ok()?;
    let view = anchored_view(&messages, hit.id, 5, Some(3))?;
    let meta = store.get_session(root).await.ok().flatten();
    let mut entry = json!({
        "session_id": hit.session_id,
        "when": human(meta.as_ref().map_or(hit.session_started, |m| m.started_at)),
        "source": meta.as_ref().map_or(hit.source.clone(), |m| m.source.clone()),
        "model": meta.as_ref().and_then(|m| m.model.clone()).or(hit.model.clone()).unwrap_or_else(|| "unknown".into()),
        "title": meta.as_ref().and_then(|m| m.title.clone()),
        "matched_role": hit.role, "match_message_id": hit.id, "snippet": hit.snippet,
        "bookend_start": view.bookend_start, "messages": view.window, "bookend_end": view.bookend_end,
        "messages_before": view.before, "messages_after": view.after,
    });
    if root != hit.session_id {
        entry["parent_session_id"] = json!(root);
    }
    Some(entry)
}

async fn title_match(
    store: &Store,
    query: &str,
    current_root: Option<&str>,
) -> Option<(String, Value)> {
    let title = query.trim().trim_matches(['`', '\'', '"']);
    if title.is_empty() {
        return None;
    }
    let session_id = store.resolve_session_by_title(title).await.ok().flatten()?;
    let root = lineage_root(store, &session_id).await;
    if current_root == Some(root.as_str()) {
        return None;
    }
    let meta = match store.get_session(&root).await.ok().flatten() {
        Some(m) => Some(m),
        None => store.get_session(&session_id).await.ok().flatten(),
    };
    if meta
        .as_ref()
        .is_some_and(|m| HIDDEN_SOURCES.contains(&m.source.as_str()))
    {
        return None;
    }
    let messages = store.get_messages(&session_id).await.unwrap_or_default();
    let anchor = messages.first().map(|m| m.id);
    let view = anchor.and_then(|a| anchored_view(&messages, a, 5, Some(3)));
    let shown_title = meta
        .as_ref()
        .and_then(|m| m.title.clone())
        .unwrap_or_else(|| title.to_owned());
    let mut entry = json!({
        "session_id": session_id,
        "when": meta.as_ref().map_or("unknown".to_owned(), |m| human(m.started_at)),
        "source": meta.as_ref().map_or("unknown".to_owned(), |m| m.source.clone()),
        "model": meta.as_ref().and_then(|m| m.model.clone()).unwrap_or_else(|| "unknown".into()),
        "title": shown_title, "matched_role": "session_title", "match_message_id": anchor,
        "snippet": format!("Session title matched: {shown_title}"),
        "bookend_start": view.as_ref().map_or(Vec::new(), |v| v.bookend_start.clone()),
        "messages": view.as_ref().map_or(Vec::new(), |v| v.window.clone()),
        "bookend_end": view.as_ref().map_or(Vec::new(), |v| v.bookend_end.clone()),
        "messages_before": view.as_ref().map_or(0, |v| v.before),
        "messages_after": view.as_ref().map_or(0, |v| v.after),
    });
    if root != session_id {
        entry["parent_session_id"] = json!(root);
    }
    Some((root, entry))
}

async fn discover(
    store: &Store,
    query: &str,
    roles: Vec<String>,
    limit: usize,
    sort: Option<&str>,
    current: Option<&str>,
) -> String {
    let current_root = match current {
        Some(c) => Some(lineage_root(store, c).await),
        None => None,
    };
    let title = title_match(store, query, current_root.as_deref()).await;
    let mut search = SearchQuery::new(query);
    search.role_filter = roles;
    search.exclude_sources = HIDDEN_SOURCES.iter().map(|s| (*s).to_owned()).collect();
    search.limit = DISCOVER_SCAN_LIMIT;
    let mut hits = match store.search(search).await {
        Ok(h) => h,
        Err(e) => return error(format!("Search failed: {e}")),
    };
    match sort {
        Some("newest") => hits.sort_by(|a, b| b.timestamp.total_cmp(&a.timestamp)),
        Some("oldest") => hits.sort_by(|a, b| a.timestamp.total_cmp(&b.timestamp)),
        _ => {}
    }
    hits.sort_by_key(|h| DEMOTED_SOURCES.contains(&h.source.as_str()));
    if hits.is_empty() && title.is_none() {
        return json!({"success": true, "mode": "discover", "query": query, "results": [], "count": 0,
            "message": "No matching sessions found."})
        .to_string();
    }
    let mut seen: Vec<String> = Vec::new();
    let mut results = Vec::new();
    if let Some((root, entry)) = title {
        seen.push(root);
        results.push(entry);
    }
    let mut chosen: Vec<(String, &SearchHit)> = Vec::new();
    for hit in &hits {
        if seen.len() >= limit {
            break;
        }
        let root = lineage_root(store, &hit.session_id).await;
        if current_root.as_deref() == Some(root.as_str())
            || current == Some(hit.session_id.as_str())
        {
            continue;
        }
        if !seen.contains(&root) {
            seen.push(root.clone());
            chosen.push((root, hit));
        }
    }
    for (root, hit) in chosen {
        if let Some(entry) = discovery_entry(store, hit, &root).await {
            results.push(entry);
        }
    }
    json!({"success": true, "mode": "discover", "query": query, "count": results.len(),
        "results": results, "sessions_searched": seen.len()})
    .to_string()
}

/// Runs the tool against `store` for the session `current_session_id`.
pub async fn session_search(
    store: &Store,
    args: &SessionSearchArgs,
    current_session_id: Option<&str>,
) -> String {
    let mut session_id = args
        .session_id
        .clone()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty());
    let mut profile = args.profile.clone().filter(|p| !p.trim().is_empty());
    // `@session:<profile>/<id>` links: ids never contain '/'.
    if let Some((embedded_profile, id)) = session_id
        .clone()
        .as_deref()
        .and_then(|s| s.split_once('/'))
        && !id.is_empty()
    {
        session_id = Some(id.to_owned());
        if profile.is_none() && !embedded_profile.is_empty() {
            profile = Some(embedded_profile.to_owned());
        }
    }
    if let Some(p) = profile {
        let local = args.current_profile.as_deref().unwrap_or("default");
        if p.trim() != local {
            return error(format!(
                "profile '{p}': reading another profile's sessions is not supported"
            ));
        }
    }
    if let (Some(id), Some(anchor)) = (&session_id, args.around_message_id) {
        return scroll(
            store,
            id,
            anchor,
            args.window.unwrap_or(5),
            current_session_id,
        )
        .await;
    }
    if let Some(id) = &session_id {
        return read_session(store, id).await;
    }
    let limit = args.limit.unwrap_or(3).clamp(1, 10) as usize;
    let query = args.query.trim();
    if query.is_empty() {
        return browse(store, limit, current_session_id).await;
    }
    let roles: Vec<String> = args
        .role_filter
        .as_deref()
        .map(|r| {
            r.split(',')
                .map(str::trim)
                .filter(|r| !r.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .filter(|r: &Vec<String>| !r.is_empty())
        .unwrap_or_else(|| vec!["user".into(), "assistant".into()]);
    let sort = args
        .sort
        .as_deref()
        .map(|s| s.trim().to_lowercase())
        .filter(|s| s == "newest" || s == "oldest");
    discover(
        store,
        query,
        roles,
        limit,
        sort.as_deref(),
        current_session_id,
    )
    .await
}
