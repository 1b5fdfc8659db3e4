-- +goose Up

-- Each outbox row is updated at claim and at finalize. A claim of an ordered
-- message changes no indexed column, so it is HOT if the row's page has
-- room for the new version; the console's indexes (00010) made every
-- non-HOT update dearer. More room per page keeps more claims HOT.
ALTER TABLE switchyard.outbox SET (fillfactor = 70);

-- +goose Down
ALTER TABLE switchyard.outbox SET (fillfactor = 80);
