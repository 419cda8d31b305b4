-- A turn reads its own session's unfinished journal rows (to order its queue, to pull news,
-- to hand leftovers on): this index finds them without reading other sessions' rows, however
-- many of those are waiting. Additive: releases before it ignore the index.
CREATE INDEX hermesd_idx_inbound_unfinished_session
    ON hermesd_inbound_events(session_key, seq)
    WHERE state IN ('received', 'processing');
