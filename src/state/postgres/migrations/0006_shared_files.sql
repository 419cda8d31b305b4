-- Files that instances on different machines must share (the pairing files, the agent's
-- MEMORY.md and USER.md), stored byte for byte under their path relative to HERMES_HOME, so
-- every rule and format of their owners carries over unchanged. `version` grows with each
-- write: readers cache a file until its version changes, as they cache a file until its
-- mtime changes.
CREATE TABLE hermesd_shared_files (
    name TEXT PRIMARY KEY,
    body BYTEA NOT NULL,
    version BIGINT NOT NULL DEFAULT 1,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- 0001 modelled pairing as tables; the shared files above keep the pairing files' format
-- instead (what `hermesd pairing` and the Python gateway read), so these were never used.
DROP TABLE hermesd_pairing_pending;
DROP TABLE hermesd_pairing_approved;
