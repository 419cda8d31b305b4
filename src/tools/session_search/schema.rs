//! The session_search schema: the parameters of Python's `SESSION_SEARCH_SCHEMA` (minus the
//! cross-profile one hermesd does not support), described in our own words.

use serde_json::{Value, json};

pub fn schema() -> Value {
    json!({
        "name": "session_search",
        "description": "Looks up earlier conversations in the local session store (SQLite FTS5); returns stored messages, no model calls. It tells you what was said before, not what an external source holds now: when the user names a URL, file, contact, thread or live system, check that first if you can, and do not call something 'not found' from history alone.\n\nFour ways to call it:\n1) query: full-text search, one result per session lineage, best `limit` sessions. Each has session_id, title, when, source, snippet, match_message_id, messages (5 either side of the hit, hit flagged), bookend_start and bookend_end (the first and last 3 user/assistant messages: goal and outcome), messages_before, messages_after.\n2) session_id + around_message_id: the `window` messages either side of that message, nothing else. To move on, pass the last (forward) or first (backward) id of the previous window; that message repeats. messages_before/messages_after below `window` means you reached an end.\n3) session_id alone: the whole session (first 20 and last 10 messages when long).\n4) no arguments: the most recent sessions with titles, previews and times, for \"what was I doing\".\n\nQuery syntax: words are ANDed; also OR, NOT, \"exact phrase\" and prefix*.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "FTS5 query. Omit to list recent sessions; ignored when session_id and around_message_id are given."},
                "limit": {"type": "integer", "description": "query only: sessions to return, 1-10 (default 3); more helps when the topic spans several sessions.", "default": 3},
                "sort": {"type": "string", "enum": ["newest", "oldest"], "description": "query only: order by time instead of relevance; 'newest' for where something stands, 'oldest' for how it began."},
                "session_id": {"type": "string", "description": "A session_id from an earlier result: read that session (alone) or a window of it (with around_message_id)."},
                "around_message_id": {"type": "integer", "description": "Centre of the window: match_message_id or any message id already shown."},
                "window": {"type": "integer", "description": "Messages on each side of the centre, 1-20 (default 5); the centre is always included.", "default": 5},
                "role_filter": {"type": "string", "description": "Comma-separated roles to search, default 'user,assistant'; add 'tool' to include tool output, or give 'tool' alone."}
            },
            "required": []
        }
    })
}
