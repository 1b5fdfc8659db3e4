// Package advisory serialises check-then-insert races on a natural key with
// PostgreSQL's transaction-level advisory locks.
//
// Two transactions that both check "is there a customer with this email?"
// and both insert when there is none create two customers, whatever the
// isolation level short of SERIALIZABLE, whenever no unique constraint can
// state the rule. Taking Lock(ctx, tx, Key("customer", email), timeout)
// before the check makes the second transaction wait until the first
// commits or rolls back; it then sees the first one's row. The lock is
// released when the transaction ends: there is nothing to unlock.
//
// # Keys
//
// Key derives the 64-bit lock key from a namespace and a natural key: the
// first 8 bytes, read big-endian as a signed int64, of the SHA-256 of the
// namespace, one zero byte, and the natural key's bytes. The namespace keeps
// a customer's key apart from an order's with the same text. KeyUUID uses
// the UUID's canonical text (lowercase, hyphenated), so a UUID and its text
// lock the same key. The derivation is a contract: processes built from
// different versions of this code must agree on it, so TestKeyStable pins
// known values. Two different natural keys share a key with probability
// about n²/2⁶⁵ for n keys in use at once: a collision only makes unrelated
// transactions wait for each other, never corrupts anything.
package advisory

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchyard/switchyard/internal/queries"
)

// DefaultTimeout is Lock's wait when given a timeout <= 0.
const DefaultTimeout = 5 * time.Second

// ErrLockTimeout means the lock was not granted within the timeout because
// another transaction holds it. It is retryable: the holder will finish.
// The transaction that got it is aborted and must be rolled back; retry
// the whole transaction.
var ErrLockTimeout = errors.New("advisory: lock not granted within the timeout (retryable)")

// sqlstateLockNotAvailable is lock_not_available, what lock_timeout raises.
const sqlstateLockNotAvailable = "55P03"

// Key returns the lock key of naturalKey in namespace; see the package
// documentation for the derivation.
func Key(namespace, naturalKey string) int64 {
	h := sha256.New()
	h.Write([]byte(namespace))
	h.Write([]byte{0})
	h.Write([]byte(naturalKey))
	return int64(binary.BigEndian.Uint64(h.Sum(nil)[:8]))
}

// KeyUUID returns the lock key of a UUID natural key: Key(namespace,
// id.String()).
func KeyUUID(namespace string, id uuid.UUID) int64 {
	return Key(namespace, id.String())
}

// Lock takes pg_advisory_xact_lock(key) in tx, waiting at most timeout
// (<= 0: DefaultTimeout; rounded up to whole milliseconds). The wait bound
// applies to this lock only: tx's own lock_timeout is in force again
// afterwards. When the lock is not granted in time it returns an error
// wrapping ErrLockTimeout, and tx is aborted.
func Lock(ctx context.Context, tx pgx.Tx, key int64, timeout time.Duration) error {
	q := queries.New(tx)
	// Most locks are free: one plain statement takes them. Only a held
	// lock pays for the bounded wait (a function call that sets and
	// restores lock_timeout).
	got, err := q.AdvisoryXactTryLock(ctx, key)
	if err != nil {
		return fmt.Errorf("advisory: lock key %d: %w", key, err)
	}
	if got {
		return nil
	}
	err = q.AdvisoryXactLock(ctx, queries.AdvisoryXactLockParams{Key: key, TimeoutMs: TimeoutMillis(timeout)})
	return Classify(err, key, timeout)
}

// TimeoutMillis is timeout as switchyard.advisory_xact_lock takes it:
// <= 0 means DefaultTimeout; rounded up to whole milliseconds.
func TimeoutMillis(timeout time.Duration) int32 {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ms := max(1, (timeout+time.Millisecond-1)/time.Millisecond)
	return int32(min(ms, 1<<31-1))
}

// Classify turns the error of a statement that took key's lock through
// switchyard.advisory_xact_lock (directly, or inside a function of its
// own: one round trip for lock and work) into Lock's errors: nil stays
// nil, a lock not granted within timeout wraps ErrLockTimeout.
func Classify(err error, key int64, timeout time.Duration) error {
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &pgErr) && pgErr.Code == sqlstateLockNotAvailable:
		return fmt.Errorf("%w: key %d after %v", ErrLockTimeout, key, time.Duration(TimeoutMillis(timeout))*time.Millisecond)
	default:
		// Not necessarily the lock's: the statement may have failed at its
		// work under the lock.
		return fmt.Errorf("advisory: under lock key %d: %w", key, err)
	}
}
