package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/internal/audit"
	"github.com/switchyard/switchyard/internal/queries"
)

// Login is SignIn without a device cookie.
func (s *Service) Login(ctx context.Context, name, password, addr string) (Session, error) {
	return s.SignIn(ctx, Attempt{Name: name, Password: password, Addr: addr})
}

// SignIn checks a's name and password and starts a new session, with a
// fresh device cookie for the account. It returns *ThrottledError while a
// sign-in delay applies to a (throttle.go), and ErrInvalidCredentials for
// a wrong name, a wrong password or a disabled account, after the same
// argon2id work in every case. A failure is counted and audited; a
// success clears the failures of its client (device or address) and is
// audited in the session's transaction.
func (s *Service) SignIn(ctx context.Context, a Attempt) (Session, error) {
	name, password, addr := NormalizeName(a.Name), a.Password, a.Addr
	from, err := s.clientOf(ctx, name, a)
	if err != nil {
		return Session{}, err
	}
	if err := s.admit(ctx, name, addr, from); err != nil {
		return Session{}, err
	}
	q := queries.New(s.pool)
	user, err := q.UserGetByName(ctx, name)
	found := err == nil
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return Session{}, fmt.Errorf("auth: sign in: %w", err)
	}
	stored := ""
	if found {
		stored = user.PasswordHash
	}
	ok, params, err := s.checkPassword(ctx, name, stored, password)
	if err != nil {
		return Session{}, fmt.Errorf("auth: sign in %q: %w", name, err)
	}
	if !found || !ok || user.DisabledAt != nil {
		return Session{}, s.failed(ctx, name, addr)
	}
	role, err := ParseRole(user.Role)
	if err != nil {
		return Session{}, err
	}
	p := Principal{UserID: user.ID, Name: user.Name, Role: role}
	token := newToken()
	var sess Session
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		tq := queries.New(tx)
		row, err := tq.SessionCreate(ctx, queries.SessionCreateParams{
			TokenHash: hashToken(token), UserID: user.ID, LifetimeSeconds: s.cfg.AbsoluteTimeout.Seconds(), RemoteAddr: addr,
		})
		if err != nil {
			return err
		}
		p.SessionID, p.ExpiresAt = row.ID, row.ExpiresAt
		sess = Session{Token: token, Principal: p, ExpiresAt: row.ExpiresAt}
		if err := tq.LoginFailureClear(ctx, queries.LoginFailureClearParams{Account: name, Client: from.key}); err != nil {
			return err
		}
		// Ended sessions are kept a day (for the Sessions page and
		// forensics), then dropped here: sign-ins are rare enough.
		if _, err := tq.SessionPrune(ctx); err != nil {
			return err
		}
		return record(ctx, tx, p, audit.ActionLogin, p.Name, audit.OK, addr)
	})
	if err != nil {
		return Session{}, fmt.Errorf("auth: start session for %q: %w", name, err)
	}
	if sess.Device, err = s.newDevice(ctx, name); err != nil {
		return Session{}, err
	}
	sess.DeviceExpires = s.cfg.Now().Add(s.cfg.DeviceLifetime)
	if params.weaker(s.cfg.Params) {
		s.rehash(ctx, name, password)
	}
	return sess, nil
}

// rehash replaces a hash made with weaker parameters than the current
// ones; a failure only leaves the old (valid) hash in place.
func (s *Service) rehash(ctx context.Context, name, password string) {
	_, err := queries.New(s.pool).UserSetPassword(ctx, queries.UserSetPasswordParams{
		Name: name, PasswordHash: HashPassword(password, s.cfg.Params),
	})
	if err != nil {
		s.cfg.Logger.WarnContext(ctx, "upgrade password hash", slog.String("user", name), slog.Any("error", err))
	}
}

// failed audits a failed sign-in (admit counted it) and returns
// ErrInvalidCredentials.
func (s *Service) failed(ctx context.Context, name, addr string) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		q := queries.New(tx)
		// The attempt was counted by admit already.
		if _, err := q.LoginFailurePrune(ctx, s.cfg.ThrottleWindow.Seconds()); err != nil {
			return err
		}
		// The actor of a failed sign-in is nobody: the name tried is the
		// target.
		return record(ctx, tx, Principal{Name: "anonymous"}, audit.ActionLogin, name, audit.Failed, addr)
	})
	if err != nil {
		return fmt.Errorf("auth: record failed sign-in: %w", err)
	}
	return ErrInvalidCredentials
}

// Authenticate returns the principal of a live session token, and marks
// the session used. ErrNoSession: no such token, or its session is over.
func (s *Service) Authenticate(ctx context.Context, token string) (Principal, error) {
	if token == "" {
		return Principal{}, ErrNoSession
	}
	row, err := queries.New(s.pool).SessionTouch(ctx, queries.SessionTouchParams{
		TokenHash: hashToken(token), IdleSeconds: s.cfg.IdleTimeout.Seconds(), TouchSeconds: s.cfg.TouchInterval.Seconds(),
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return Principal{}, ErrNoSession
	}
	if err != nil {
		return Principal{}, fmt.Errorf("auth: look up session: %w", err)
	}
	role, err := ParseRole(row.Role)
	if err != nil {
		return Principal{}, err
	}
	return Principal{UserID: row.UserID, Name: row.Name, Role: role, SessionID: row.SessionID, ExpiresAt: row.ExpiresAt}, nil
}

// Logout ends p's session, audited as p.
func (s *Service) Logout(ctx context.Context, p Principal, addr string) error {
	return s.revokeOne(ctx, p, p.SessionID, audit.ActionLogout, addr)
}

// RevokeSession ends session id on behalf of admin (audited as theirs).
// ErrNoSession: it was over already.
func (s *Service) RevokeSession(ctx context.Context, admin Principal, id int64, addr string) error {
	return s.revokeOne(ctx, admin, id, audit.ActionSessionRevoke, addr)
}

func (s *Service) revokeOne(ctx context.Context, actor Principal, id int64, action, addr string) error {
	if id == 0 {
		return nil // the demo admin has no session to end
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		row, err := queries.New(tx).SessionRevoke(ctx, id)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNoSession
		}
		if err != nil {
			return err
		}
		if err := revoked(ctx, tx, []int64{row.ID}); err != nil {
			return err
		}
		return record(ctx, tx, actor, action, fmt.Sprintf("session %d", row.ID), audit.OK, addr)
	})
	if err != nil && !errors.Is(err, ErrNoSession) {
		return fmt.Errorf("auth: end session %d: %w", id, err)
	}
	return err
}

// LiveSession is a session that has not ended, for the Sessions page.
type LiveSession struct {
	ID         int64
	User       string
	Role       string
	Created    time.Time
	LastSeen   time.Time
	Expires    time.Time
	RemoteAddr string
}

// Sessions lists up to limit live sessions, newest first.
func (s *Service) Sessions(ctx context.Context, limit int) ([]LiveSession, error) {
	rows, err := queries.New(s.pool).SessionListLive(ctx, int32(limit))
	if err != nil {
		return nil, fmt.Errorf("auth: list sessions: %w", err)
	}
	out := make([]LiveSession, len(rows))
	for i, r := range rows {
		out[i] = LiveSession{ID: r.ID, User: r.Name, Role: r.Role, Created: r.CreatedAt, LastSeen: r.LastSeenAt, Expires: r.ExpiresAt, RemoteAddr: r.RemoteAddr}
	}
	return out, nil
}
