-- The tool calls of journaled turns that started running (as in state.db's gateway schema):
-- a turn resumed on another instance runs a recorded call without a result only when no
-- mark says it started. Additive: releases before it never read or write the table.
CREATE TABLE hermesd_tool_starts (
    session_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    started_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (session_id, call_id)
);
