-- +goose Up

-- A browser that reconnects resumes from its last event id by reading
-- what it missed of the kinds (and subjects) its page shows. Without these
-- a page of a rare kind (dead letters) walked every change since its
-- cursor, a day of statistics rows included, and gave up after a few
-- hundred: the resume window was minutes, not the retention. With them,
-- each kind (and kind and subject) is one bounded index walk whatever the
-- other kinds wrote (internal/changefeed.Since, EXPLAIN.md). The feed
-- carries state changes only, so two more indexes cost writers little.
CREATE INDEX changes_kind_cursor ON switchyard.changes (kind, xid, id);
CREATE INDEX changes_subject_cursor ON switchyard.changes (kind, subject, xid, id);

-- +goose Down
DROP INDEX switchyard.changes_subject_cursor;
DROP INDEX switchyard.changes_kind_cursor;
