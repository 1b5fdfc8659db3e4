package audit

import (
	"bytes"
	"context"
	"crypto/hmac"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/switchyard/switchyard/internal/queries"
)

// ErrTruncated means rows the last checkpoint vouched for are gone:
// deleted from the end, or from the middle.
var ErrTruncated = errors.New("audit: rows deleted")

// ErrCheckpointMismatch means the row the last checkpoint names no longer
// has the hash it had (rows up to it were changed and re-chained), or the
// checkpoint itself does not verify under the key.
var ErrCheckpointMismatch = errors.New("audit: checkpoint does not match")

// CheckConfig is what Check compares the trail with.
type CheckConfig struct {
	// Key is the sealing key; nil: seals are not checked (and the report
	// says the chain is unkeyed).
	Key []byte
	// CheckpointFile holds the checkpoints; "": none is checked.
	CheckpointFile string
}

// Report is what Check found.
type Report struct {
	Rows int64 // rows whose hash and link were recomputed and match
	// Keyed: seals were checked. Sealed rows matched their seals;
	// Unsealed are the newest rows, not sealed yet.
	Keyed            bool
	Sealed, Unsealed int64
	// Checkpoint is the last one found; nil: none.
	Checkpoint *Checkpoint
	// Notes say what was not checked, and why.
	Notes []string
}

// Check verifies the trail as far as cfg allows: the hash chain (Verify),
// then with a key every seal, then the last checkpoint. The error joins
// every problem found (ErrChainBroken, ErrSealBroken, ErrTruncated,
// ErrCheckpointMismatch), each naming its row.
func Check(ctx context.Context, db queries.DBTX, cfg CheckConfig) (Report, error) {
	var r Report
	var problems []error
	n, err := Verify(ctx, db)
	r.Rows = n
	if err != nil {
		if !errors.Is(err, ErrChainBroken) {
			return r, err
		}
		problems = append(problems, err)
	}
	var sealedUpTo int64
	if cfg.Key == nil {
		r.Notes = append(r.Notes, "unkeyed: no sealing key given, so rows edited and re-chained with switchyard.audit_row_hash would pass; only a checkpoint taken before the edit shows it")
	} else {
		r.Keyed = true
		if sealedUpTo, err = checkSeals(ctx, db, cfg.Key, &r, &problems); err != nil {
			return r, err
		}
	}
	if cfg.CheckpointFile == "" {
		r.Notes = append(r.Notes, "no checkpoint file: rows deleted from the end cannot be detected")
		return r, errors.Join(problems...)
	}
	cp, err := LastCheckpoint(cfg.CheckpointFile)
	switch {
	case errors.Is(err, ErrNoCheckpoint):
		r.Notes = append(r.Notes, "no checkpoint in "+cfg.CheckpointFile+" yet: rows deleted from the end cannot be detected")
		return r, errors.Join(problems...)
	case err != nil:
		return r, err
	}
	r.Checkpoint = &cp
	if err := checkCheckpoint(ctx, db, cfg.Key, cp, sealedUpTo, &r); err != nil {
		problems = append(problems, err...)
	}
	return r, errors.Join(problems...)
}

// checkSeals checks every row's seal in chain order and returns the id
// of the newest sealed row. Rows after it are the unsealed tail; a row
// without a seal before it lost its seal.
func checkSeals(ctx context.Context, db queries.DBTX, key []byte, r *Report, problems *[]error) (int64, error) {
	q := queries.New(db)
	var after, firstUnsealed, lastSealed int64
	var mismatch, lost bool
	for {
		rows, err := q.AuditListSealedRows(ctx, queries.AuditListSealedRowsParams{AfterID: after, MaxRows: 5000})
		if err != nil {
			return 0, fmt.Errorf("audit: read seals: %w", err)
		}
		for _, row := range rows {
			after = row.ID
			if row.Mac == nil {
				r.Unsealed++
				if firstUnsealed == 0 {
					firstUnsealed = row.ID
				}
				continue
			}
			if firstUnsealed != 0 && !lost {
				lost = true
				*problems = append(*problems, fmt.Errorf("%w: row %d has no seal but later rows do: its seal was deleted", ErrSealBroken, firstUnsealed))
			}
			lastSealed = row.ID
			if !hmac.Equal(row.Mac, sealMAC(key, row.ID, row.Hash)) {
				if !mismatch {
					mismatch = true
					*problems = append(*problems, fmt.Errorf("%w: row %d does not match its seal: it (or a row before it) was changed and re-chained, or sealed under another key", ErrSealBroken, row.ID))
				}
				continue
			}
			r.Sealed++
		}
		if len(rows) < 5000 {
			break
		}
	}
	if lost {
		r.Unsealed = 0 // they are not a tail: counted as a problem
	}
	orphans, err := q.AuditSealCountOrphans(ctx)
	if err != nil {
		return 0, fmt.Errorf("audit: read seals: %w", err)
	}
	if orphans.Orphans > 0 {
		*problems = append(*problems, fmt.Errorf("%w: %d seals name rows that are gone, the first row %d", ErrTruncated, orphans.Orphans, orphans.FirstID))
	}
	return lastSealed, nil
}

// checkCheckpoint compares the trail with cp.
func checkCheckpoint(ctx context.Context, db queries.DBTX, key []byte, cp Checkpoint, sealedUpTo int64, r *Report) []error {
	at, err := queries.New(db).AuditGetAt(ctx, cp.ID)
	if err != nil {
		return []error{fmt.Errorf("audit: compare with the checkpoint: %w", err)}
	}
	var problems []error
	when := cp.At.Format("2006-01-02 15:04:05Z")
	hash, err := hex.DecodeString(cp.Hash)
	switch {
	case err != nil:
		problems = append(problems, fmt.Errorf("%w: its hash %q does not parse", ErrCheckpointMismatch, cp.Hash))
	case at.Hash == nil && at.MaxID < cp.ID:
		problems = append(problems, fmt.Errorf("%w: truncated: the checkpoint of %s recorded %d rows up to row %d, but the trail now ends at row %d with %d rows",
			ErrTruncated, when, cp.Rows, cp.ID, at.MaxID, at.Rows))
	case at.Hash == nil:
		problems = append(problems, fmt.Errorf("%w: row %d, the head of the checkpoint of %s (%d rows), is missing: rows were deleted; the trail now has %d rows, up to row %d",
			ErrTruncated, cp.ID, when, cp.Rows, at.Rows, at.MaxID))
	case !bytes.Equal(at.Hash, hash):
		problems = append(problems, fmt.Errorf("%w: row %d's hash differs from the checkpoint of %s: rows up to it were changed and re-chained", ErrCheckpointMismatch, cp.ID, when))
	}
	if at.Hash != nil && at.RowsUpto != cp.Rows {
		problems = append(problems, fmt.Errorf("%w: %d rows up to row %d, but the checkpoint of %s recorded %d", ErrTruncated, at.RowsUpto, cp.ID, when, cp.Rows))
	}
	switch {
	case cp.Keyed && key == nil:
		r.Notes = append(r.Notes, "the last checkpoint is keyed, but no key was given: its MAC was not checked")
	case cp.Keyed && err == nil && !hmac.Equal(mustHex(cp.MAC), checkpointMAC(key, cp.ID, cp.Rows, hash)):
		problems = append(problems, fmt.Errorf("%w: the checkpoint of %s does not verify under the key: the file was edited, or written under another key", ErrCheckpointMismatch, when))
	case !cp.Keyed && key != nil:
		r.Notes = append(r.Notes, "the last checkpoint is unkeyed: anyone who can write the file could have written it")
	case cp.Keyed && cp.ID > sealedUpTo:
		problems = append(problems, fmt.Errorf("%w: the checkpoint of %s vouches for rows up to %d, but seals end at row %d", ErrSealBroken, when, cp.ID, sealedUpTo))
	}
	return problems
}

func mustHex(s string) []byte {
	b, _ := hex.DecodeString(s) // a bad MAC is a mismatch
	return b
}
