-- Search on PostgreSQL (issue 22). The searched text of a message is SQLite's (content, tool
-- name and tool-call JSON joined by spaces, `schema.rs` FTS_ROW); the queries in
-- `search.rs` use exactly these expressions, so the planner can use the indexes. No column is
-- added: the tables keep state.db's shape for `hermesd state migrate`.

-- Words: ASCII punctuation becomes spaces (FTS5's unicode61 splits words there; PostgreSQL's
-- parser would keep `github.com` whole), combining diacritics are removed after an NFD
-- decomposition (unicode61's remove_diacritics: `cafe` finds `café`), then the 'simple'
-- configuration lower-cases and does not stem, like unicode61. `search.rs` SEARCH_WORDS is
-- this expression. Only the first 100,000 characters are indexed: a tsvector cannot exceed
-- 1 MB, and a large tool output of many different words would otherwise fail its insert.
CREATE INDEX idx_messages_search_words ON messages USING GIN (
    to_tsvector('simple'::regconfig, regexp_replace(normalize(translate(left(
        COALESCE(content, '') || ' ' || COALESCE(tool_name, '') || ' ' || COALESCE(tool_calls, ''),
        100000), '!"#$%&''()*+,-./:;<=>?@[\]^_`{|}~', '                                '), NFD),
        '[\u0300-\u036f]', '', 'g'))
);

-- Substrings (CJK, which has no spaces between words): ILIKE through trigrams.
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE INDEX idx_messages_search_trigram ON messages USING GIN (
    (COALESCE(content, '') || ' ' || COALESCE(tool_name, '') || ' ' || COALESCE(tool_calls, ''))
    gin_trgm_ops
);
