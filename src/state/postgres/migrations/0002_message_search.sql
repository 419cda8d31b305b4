-- Search on PostgreSQL (issue 22). The searched text of a message is SQLite's (content, tool
-- name and tool-call JSON joined by spaces, `schema.rs` FTS_ROW); the queries in
-- `search.rs` use exactly these expressions, so the planner can use the indexes. No column is
-- added: the tables keep state.db's shape for `hermesd state migrate`.

-- Words: the 'simple' configuration lower-cases and does not stem, like FTS5's unicode61.
CREATE INDEX idx_messages_search_words ON messages USING GIN (
    to_tsvector('simple'::regconfig,
        COALESCE(content, '') || ' ' || COALESCE(tool_name, '') || ' ' || COALESCE(tool_calls, ''))
);

-- Substrings (CJK, which has no spaces between words): ILIKE through trigrams.
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE INDEX idx_messages_search_trigram ON messages USING GIN (
    (COALESCE(content, '') || ' ' || COALESCE(tool_name, '') || ' ' || COALESCE(tool_calls, ''))
    gin_trgm_ops
);
