package audit

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/internal/service"
)

// Anchoring the trail outside the database.
//
// The hash chain alone shows an edit only to someone who does not
// recompute it: whoever can write the table (a superuser who disables the
// trigger) can change a row, recompute every later hash with the schema's
// own switchyard.audit_row_hash, and the chain verifies again; rows
// deleted from the end leave a shorter chain that verifies too. Two
// anchors close those holes:
//
//   - Seals (a keyed chain): the Sealer writes, for every row in chain
//     order, an HMAC-SHA256 of its id and hash under a key the database
//     never sees (MinKeyBytes or more, from a file the console reads at
//     start). A row's hash covers every row before it, so a valid seal
//     vouches for the whole prefix; a re-chained row no longer matches
//     its seal, and making a new seal needs the key.
//   - Checkpoints: every CheckpointRows rows or CheckpointInterval, and at
//     Stop, the Sealer appends the head (newest id, its hash, the row
//     count; with a key, an HMAC of them) to a file outside the database
//     (and logs it). Check compares the trail with the last one: rows
//     deleted from the end, or a head that changed, show.
//
// What they cannot do: rows written since the last seal (Poll, one second
// by default) or checkpoint can be changed or deleted without a trace by
// someone who can also delete seals; an attacker with the key (or control
// of the console's host) can forge both; and the checkpoint file is only
// as safe as where it is kept (ship it, or the log, to an append-only sink).

// MinKeyBytes is the least length of a sealing key.
const MinKeyBytes = 32

// ErrSealBroken means a seal does not match its row, or rows that were
// sealed have lost their seals: the trail was changed outside the
// application (or sealed under another key).
var ErrSealBroken = errors.New("audit: seal broken")

func sealMAC(key []byte, id int64, hash []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("switchyard audit seal v1\x00"))
	_ = binary.Write(m, binary.BigEndian, id)
	m.Write(hash)
	return m.Sum(nil)
}

// SealerConfig configures a Sealer. Zero fields take the defaults.
type SealerConfig struct {
	// Key seals rows; nil: no seals (the chain stays unkeyed), but
	// checkpoints are still written.
	Key []byte
	// CheckpointFile is where checkpoints are appended; "": none (only
	// logged).
	CheckpointFile string
	// CheckpointRows and CheckpointInterval: a checkpoint is written when
	// this many rows were added since the last, or this long after it if
	// any was. Defaults 1000 and 5m.
	CheckpointRows     int64
	CheckpointInterval time.Duration
	// Poll: how often new rows are sealed. Default 1s.
	Poll time.Duration
	// StatementTimeout bounds every query. Default 30s.
	StatementTimeout time.Duration
	Logger           *slog.Logger
}

func (c SealerConfig) withDefaults() SealerConfig {
	if c.CheckpointRows <= 0 {
		c.CheckpointRows = 1000
	}
	if c.CheckpointInterval <= 0 {
		c.CheckpointInterval = 5 * time.Minute
	}
	if c.Poll <= 0 {
		c.Poll = time.Second
	}
	if c.StatementTimeout <= 0 {
		c.StatementTimeout = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Sealer seals new rows and writes checkpoints until Stop. Several
// instances may run on one database with the same key: a row sealed twice
// keeps its first seal, which is the same.
type Sealer struct {
	cfg  SealerConfig
	pool *pgxpool.Pool
	loop service.Lifecycle
	// last is the head of the last checkpoint written, and when; used
	// only by the loop (and by Stop after the loop returned).
	last     Checkpoint
	lastTime time.Time
}

// NewSealer returns a Sealer on pool; Start runs it.
func NewSealer(pool *pgxpool.Pool, cfg SealerConfig) (*Sealer, error) {
	if cfg.Key != nil && len(cfg.Key) < MinKeyBytes {
		return nil, fmt.Errorf("audit: sealing key of %d bytes: want %d or more", len(cfg.Key), MinKeyBytes)
	}
	return &Sealer{cfg: cfg.withDefaults(), pool: pool}, nil
}

// Start seals what is pending and writes a checkpoint at once, then runs
// until Stop. It returns an error if already started.
func (s *Sealer) Start(ctx context.Context) error {
	return s.loop.Start(ctx, nil, s.run)
}

// Stop ends the sealer after a last seal and checkpoint. It is
// idempotent.
func (s *Sealer) Stop() {
	if !s.loop.Stop() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.StatementTimeout)
	defer cancel()
	s.tick(ctx, true)
}

func (s *Sealer) run(ctx context.Context) {
	if s.cfg.CheckpointFile != "" {
		// Continue from the file's last checkpoint: the next one must
		// extend the trail it vouched for (stillHolds).
		cp, err := LastCheckpoint(s.cfg.CheckpointFile)
		if err != nil && !errors.Is(err, ErrNoCheckpoint) {
			s.logFailure(ctx, "audit checkpoint: read the last", err)
		}
		s.last = cp
	}
	tick := time.NewTicker(s.cfg.Poll)
	defer tick.Stop()
	for {
		s.tick(ctx, s.lastTime.IsZero())
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// tick seals pending rows, then writes a checkpoint if one is due (or
// force, when the head moved since the last).
func (s *Sealer) tick(ctx context.Context, force bool) {
	if _, err := s.Seal(ctx); err != nil {
		s.logFailure(ctx, "audit trail not sealed", err)
		return
	}
	qctx, cancel := context.WithTimeout(ctx, s.cfg.StatementTimeout)
	defer cancel()
	q := queries.New(s.pool)
	// The newest id first: counting the rows costs a scan of the trail,
	// paid only when a checkpoint is written. Ids may have gaps (a
	// rolled-back insert), so this counts a little early, never late.
	id, err := s.vouchableID(qctx, q)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && (id == 0 || id == s.last.ID)) {
		return // nothing (new) to vouch for
	}
	due := force || id-s.last.ID >= s.cfg.CheckpointRows || time.Since(s.lastTime) >= s.cfg.CheckpointInterval
	if err != nil || !due {
		s.logFailure(ctx, "audit checkpoint: read the head", err)
		return
	}
	if err := s.stillHolds(qctx, q); err != nil {
		s.logFailure(ctx, "audit checkpoint refused", err)
		return
	}
	head, err := s.vouchableHead(qctx, q, id)
	if err != nil {
		s.logFailure(ctx, "audit checkpoint: read the head", err)
		return
	}
	cp := newCheckpoint(s.cfg.Key, head.ID, head.Rows, head.Hash, time.Now())
	if err := s.write(cp); err != nil {
		s.cfg.Logger.Error("audit checkpoint not written", slog.Any("error", err))
		return
	}
	s.last, s.lastTime = cp, time.Now()
}

// vouchableID is the newest row a checkpoint may vouch for: with a key, the
// newest sealed row, not the newest row, since a row added after this
// tick's Seal has no seal yet and Check refuses a checkpoint beyond the
// seals; without one, the newest row.
func (s *Sealer) vouchableID(ctx context.Context, q *queries.Queries) (int64, error) {
	if s.cfg.Key == nil {
		return q.AuditHeadIDGet(ctx)
	}
	id, _, err := s.sealHead(ctx)
	return id, err
}

// vouchableHead is row id's hash and the count of rows up to it, as a
// checkpoint records them.
func (s *Sealer) vouchableHead(ctx context.Context, q *queries.Queries, id int64) (queries.AuditHeadGetRow, error) {
	if s.cfg.Key == nil {
		return q.AuditHeadGet(ctx)
	}
	at, err := q.AuditGetAt(ctx, id)
	if err == nil && at.Hash == nil {
		err = fmt.Errorf("audit: sealed row %d is gone", id)
	}
	return queries.AuditHeadGetRow{ID: id, Hash: at.Hash, Rows: at.RowsUpto}, err
}

// stillHolds checks that the trail still holds what the last checkpoint
// vouched for, so that a trail cut short or re-chained is never
// checkpointed as if it were whole (which would hide it from Check).
func (s *Sealer) stillHolds(ctx context.Context, q *queries.Queries) error {
	if s.last.ID == 0 {
		return nil
	}
	at, err := q.AuditGetAt(ctx, s.last.ID)
	if err != nil {
		return fmt.Errorf("audit: compare with the last checkpoint: %w", err)
	}
	if hex.EncodeToString(at.Hash) != s.last.Hash || at.RowsUpto != s.last.Rows {
		return fmt.Errorf("%w: the trail no longer holds row %d and the %d rows up to it as the last checkpoint recorded them: run console audit verify",
			ErrCheckpointMismatch, s.last.ID, s.last.Rows)
	}
	return nil
}

// logFailure logs err (if any) unless the sealer is stopping.
func (s *Sealer) logFailure(ctx context.Context, what string, err error) {
	if err != nil && ctx.Err() == nil {
		s.cfg.Logger.Error(what, slog.Any("error", err))
	}
}

// write appends cp to the checkpoint file (if any) and logs it: the log
// is a second copy outside the database.
func (s *Sealer) write(cp Checkpoint) error {
	if s.cfg.CheckpointFile != "" {
		if err := AppendCheckpoint(s.cfg.CheckpointFile, cp); err != nil {
			return err
		}
	}
	s.cfg.Logger.Info("audit checkpoint", slog.Int64("id", cp.ID), slog.Int64("rows", cp.Rows),
		slog.String("hash", cp.Hash), slog.Bool("keyed", cp.Keyed), slog.String("mac", cp.MAC))
	return nil
}

// Seal seals every row after the newest sealed one, in chain order, and
// returns how many. Without a key it does nothing. It refuses to seal on
// top of a trail that changed: the newest seal must still match its row,
// and each new row must link to the one before it.
func (s *Sealer) Seal(ctx context.Context) (int, error) {
	if s.cfg.Key == nil {
		return 0, nil
	}
	after, prev, err := s.sealHead(ctx)
	if err != nil {
		return 0, err
	}
	const batch = 1000
	total := 0
	for {
		qctx, cancel := context.WithTimeout(ctx, s.cfg.StatementTimeout)
		n, last, err := s.sealBatch(qctx, after, prev, batch)
		cancel()
		total += n
		if err != nil || n < batch {
			return total, err
		}
		after, prev = last.ID, last.Hash
	}
}

// sealHead returns the newest sealed row's id and hash (0 and the zero
// hash when none is), after checking its seal.
func (s *Sealer) sealHead(ctx context.Context) (int64, []byte, error) {
	qctx, cancel := context.WithTimeout(ctx, s.cfg.StatementTimeout)
	defer cancel()
	head, err := queries.New(s.pool).AuditSealHeadGet(qctx)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, make([]byte, sha256.Size), nil
	}
	if err != nil {
		return 0, nil, fmt.Errorf("audit: read the newest seal: %w", err)
	}
	if !hmac.Equal(head.Mac, sealMAC(s.cfg.Key, head.ID, head.Hash)) {
		return 0, nil, fmt.Errorf("%w: row %d no longer matches its seal; not sealing on top of it", ErrSealBroken, head.ID)
	}
	return head.ID, head.Hash, nil
}

func (s *Sealer) sealBatch(ctx context.Context, after int64, prev []byte, n int) (int, queries.AuditListUnsealedRow, error) {
	q := queries.New(s.pool)
	rows, err := q.AuditListUnsealed(ctx, queries.AuditListUnsealedParams{AfterID: after, MaxRows: int32(n)})
	if err != nil || len(rows) == 0 {
		return 0, queries.AuditListUnsealedRow{}, err
	}
	ids, macs := make([]int64, len(rows)), make([][]byte, len(rows))
	for i, r := range rows {
		if !bytes.Equal(r.PrevHash, prev) {
			return 0, r, fmt.Errorf("%w: row %d does not link to the row before it; not sealing it", ErrChainBroken, r.ID)
		}
		ids[i], macs[i], prev = r.ID, sealMAC(s.cfg.Key, r.ID, r.Hash), r.Hash
	}
	if err := q.AuditSealInsert(ctx, queries.AuditSealInsertParams{Ids: ids, Macs: macs}); err != nil {
		return 0, rows[0], fmt.Errorf("audit: store seals: %w", err)
	}
	return len(rows), rows[len(rows)-1], nil
}
