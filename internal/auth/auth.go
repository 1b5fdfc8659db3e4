// Package auth holds the console's local accounts, their server-side
// sessions and the roles that routes require.
//
// Passwords are hashed with argon2id (password.go). A session is a random
// 256-bit token in an HttpOnly cookie; the database keeps only its SHA-256,
// so a copy of the sessions table signs nobody in. A session ends at its
// absolute timeout, after its idle timeout, when its account is disabled,
// or when revoked (logout, password change, admin revoke): every
// revocation appends a changefeed.KindSessionRevoked change in its
// transaction, so that every console instance closes the streams of those
// sessions (StreamGuard). Sign-ins are slowed by delays that grow with
// failures per account and client, per account and per address, counted
// in the database so that they hold across instances, with a device
// cookie that spares a browser which signed in before from what others
// cause (throttle.go); a wrong name costs the same argon2id work as a
// wrong password. Every
// sign-in, sign-out, failure and account change is recorded in the audit
// trail in the same transaction.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/crypto/argon2"

	"github.com/switchyard/switchyard/internal/audit"
	"github.com/switchyard/switchyard/internal/changefeed"
)

// Errors callers map to responses.
var (
	// ErrInvalidCredentials: a wrong name or password, or a disabled
	// account (one message for all three: none is revealed).
	ErrInvalidCredentials = errors.New("auth: wrong name or password")
	// ErrNoSession: no live session for that token.
	ErrNoSession = errors.New("auth: no session")
	// ErrUserExists and ErrNoUser: account management.
	ErrUserExists = errors.New("auth: account exists")
	ErrNoUser     = errors.New("auth: no such account")
)

// Config configures a Service. Zero fields take the documented defaults.
type Config struct {
	// Params hash new passwords. Default DefaultParams.
	Params Params
	// IdleTimeout ends a session unused this long. Default 30m.
	IdleTimeout time.Duration
	// AbsoluteTimeout ends a session this long after sign-in. Default 12h.
	AbsoluteTimeout time.Duration
	// TouchInterval: a session's last use is written at most this often.
	// Default 1m (so the idle timeout is exact to within it).
	TouchInterval time.Duration
	// Sign-in delays (throttle.go): failures count for ThrottleWindow
	// (default 15m). Past FreeFailures of one account from one client
	// (default 5), AccountFreeFailures of one account from clients
	// without a device cookie (default 20, each address counting at most
	// FreeFailures) or AddressFreeFailures from one address without a
	// device cookie (default 50), the next attempt waits BaseDelay
	// (default 1s) after the latest failure, doubling with each further
	// failure up to MaxDelay (default 15m).
	ThrottleWindow      time.Duration
	FreeFailures        int
	AccountFreeFailures int
	AddressFreeFailures int
	BaseDelay, MaxDelay time.Duration
	// DeviceLifetime: a device cookie is honoured this long after the
	// sign-in that set it. Default 90 days.
	DeviceLifetime time.Duration
	// Now is the clock device cookies are issued and checked by. Default
	// time.Now.
	Now func() time.Time
	// MaxConcurrentHashes bounds the argon2id computations running at once
	// (each takes MemoryKiB): a burst of sign-ins queues instead of
	// exhausting memory. Default 4.
	MaxConcurrentHashes int
	// DeniedAuditInterval: a session's requests refused for its role are
	// audited at most once per interval (RecordDenied). Default 1m.
	DeniedAuditInterval time.Duration
	// Notify is called after a commit that appended to the change feed
	// (revocations, audit rows). Optional.
	Notify func()
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Params == (Params{}) {
		c.Params = DefaultParams
	}
	c.IdleTimeout = orDefault(c.IdleTimeout, 30*time.Minute)
	c.AbsoluteTimeout = orDefault(c.AbsoluteTimeout, 12*time.Hour)
	c.TouchInterval = orDefault(c.TouchInterval, time.Minute)
	c.ThrottleWindow = orDefault(c.ThrottleWindow, 15*time.Minute)
	c.DeniedAuditInterval = orDefault(c.DeniedAuditInterval, time.Minute)
	c.FreeFailures = orDefaultInt(c.FreeFailures, 5)
	c.AccountFreeFailures = orDefaultInt(c.AccountFreeFailures, 20)
	c.AddressFreeFailures = orDefaultInt(c.AddressFreeFailures, 50)
	c.BaseDelay = orDefault(c.BaseDelay, time.Second)
	c.MaxDelay = orDefault(c.MaxDelay, 15*time.Minute)
	c.DeviceLifetime = orDefault(c.DeviceLifetime, 90*24*time.Hour)
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.MaxConcurrentHashes <= 0 {
		c.MaxConcurrentHashes = 4
	}
	if c.Notify == nil {
		c.Notify = func() {}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

func orDefaultInt(n, def int) int {
	if n <= 0 {
		return def
	}
	return n
}

// Principal is who a request acts as.
type Principal struct {
	UserID    int64 // 0 for the demo admin, who is no account
	Name      string
	Role      Role
	SessionID int64 // 0 for the demo admin
	// ExpiresAt is the session's absolute end (zero for the demo admin):
	// a live stream ends then, whatever it is doing.
	ExpiresAt time.Time
}

// ActorID is the principal's account id for the audit trail; nil for the
// demo admin.
func (p Principal) ActorID() *int64 {
	if p.UserID == 0 {
		return nil
	}
	id := p.UserID
	return &id
}

// DemoAdmin is the principal of demo mode's automatic sign-in.
var DemoAdmin = Principal{Name: "demo", Role: Admin}

// Service manages accounts and sessions. It is safe for concurrent use.
type Service struct {
	pool  *pgxpool.Pool
	cfg   Config
	dummy string        // a hash to verify against when the account is unknown
	slots chan struct{} // bounds concurrent argon2id work
	// verified counts argon2id verifications and work their cost (and
	// any padding's; see Params.work), so that a test can check that a
	// wrong name costs the same work as a wrong password.
	verified, work atomic.Int64

	keyMu  sync.Mutex
	devKey []byte // guarded by keyMu; the device cookie key, once read
}

// New returns a Service on pool.
func New(pool *pgxpool.Pool, cfg Config) *Service {
	cfg = cfg.withDefaults()
	return &Service{
		pool: pool, cfg: cfg,
		dummy: HashPassword("switchyard dummy password", cfg.Params),
		slots: make(chan struct{}, cfg.MaxConcurrentHashes),
	}
}

// Session is a new sign-in: Token goes into the cookie and nowhere else.
type Session struct {
	Token     string
	Principal Principal
	ExpiresAt time.Time
	// Device is a fresh device cookie for the account, to keep until
	// DeviceExpires (see Attempt.Device).
	Device        string
	DeviceExpires time.Time
}

// NormalizeName is how account names are compared: trimmed, lower case.
func NormalizeName(name string) string { return strings.ToLower(strings.TrimSpace(name)) }

func hashToken(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

func newToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (Go 1.24+ panics instead)
	return base64.RawURLEncoding.EncodeToString(b)
}

// checkPassword verifies password for account name against stored, its
// hash ("" when no account has that name). Whatever stored is, it costs
// about the work of one verification under the current parameters, so
// that how long the answer takes tells nothing about the account:
//
//   - No account, or a stored hash that does not parse: verify against
//     the dummy hash (current parameters), and fail. A hash that does not
//     parse is logged, since the account cannot sign in until an admin
//     resets its password, and answers like a wrong password: an error
//     (a 500) would tell an attacker which names exist.
//   - A hash made with weaker parameters (they were raised since, and the
//     account has not signed in since to be rehashed): only its own
//     parameters can check it, so verify under them, then pad with
//     argon2id work that makes up the difference (padding). Without the
//     padding such an account answers measurably faster than an unknown
//     name until its next sign-in, which tells an attacker it exists.
//   - A hash made with stronger parameters (they were lowered since)
//     costs more than an unknown name, and stays so: an unknown name
//     cannot be padded to match without knowing what to match. Lowering
//     the parameters is not supported for that reason (and it weakens
//     every new hash).
//
// What remains is argon2id's own variance, and the cost of the padding's
// allocation; both are small next to the gap it closes. ok is false for
// every failure; params are the stored hash's (to upgrade it).
func (s *Service) checkPassword(ctx context.Context, name, stored, password string) (ok bool, params Params, err error) {
	if stored != "" {
		ok, params, err = s.verify(ctx, stored, password)
		if err == nil {
			if pad, need := padding(params, s.cfg.Params); need {
				salt := make([]byte, 16)
				_, err = s.argon2id(ctx, password, salt, pad)
			}
			return ok, params, err
		}
		if !errors.Is(err, errMalformedHash) {
			return false, Params{}, err
		}
		s.cfg.Logger.ErrorContext(ctx, "stored password hash does not parse: the account cannot sign in until its password is reset",
			slog.String("user", name), slog.Any("error", err))
	}
	_, _, err = s.verify(ctx, s.dummy, password)
	return false, Params{}, err
}

// verify reports whether password matches encoded, and the parameters
// encoded was made with; the comparison takes constant time.
func (s *Service) verify(ctx context.Context, encoded, password string) (bool, Params, error) {
	p, salt, key, err := decodeHash(encoded)
	if err != nil {
		return false, Params{}, err
	}
	s.verified.Add(1)
	got, err := s.argon2id(ctx, password, salt, p)
	if err != nil {
		return false, Params{}, err
	}
	return subtle.ConstantTimeCompare(got, key) == 1, p, nil
}

// argon2id runs one argon2id computation under a slot, so that at most
// MaxConcurrentHashes run at once.
func (s *Service) argon2id(ctx context.Context, password string, salt []byte, p Params) ([]byte, error) {
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-s.slots }()
	s.work.Add(p.work())
	return argon2.IDKey([]byte(password), salt, p.Time, p.MemoryKiB, p.Threads, p.KeyLen), nil
}

// inTx runs fn in one transaction and calls Notify after it committed.
func (s *Service) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	if err := pgx.BeginFunc(ctx, s.pool, fn); err != nil {
		return err
	}
	s.cfg.Notify()
	return nil
}

// revoked appends the change that closes the streams of sessions ids, in
// chunks small enough for the feed's payload bound.
func revoked(ctx context.Context, tx pgx.Tx, ids []int64) error {
	for len(ids) > 0 {
		n := min(len(ids), 100)
		payload, err := json.Marshal(map[string][]int64{"sessions": ids[:n]})
		if err != nil {
			return err
		}
		if err := changefeed.Append(ctx, tx, changefeed.Change{Kind: changefeed.KindSessionRevoked, Subject: "sessions", Payload: payload}); err != nil {
			return err
		}
		ids = ids[n:]
	}
	return nil
}

// record is audit.Record for the principal p.
func record(ctx context.Context, tx pgx.Tx, p Principal, action, target string, outcome audit.Outcome, addr string) error {
	_, err := audit.Record(ctx, tx, audit.Entry{
		Actor: p.Name, ActorID: p.ActorID(), Action: action, Target: target, Outcome: outcome, RemoteAddr: addr,
	})
	return err
}
