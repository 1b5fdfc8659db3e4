package auth

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchyard/switchyard/internal/audit"
	"github.com/switchyard/switchyard/internal/queries"
)

// CLI is the actor of account changes made with `console user ...`.
var CLI = Principal{Name: "cli"}

// AddUser creates an account. ErrUserExists: the name is taken;
// ErrWeakPassword: the password is too short or too long.
func (s *Service) AddUser(ctx context.Context, actor Principal, name string, role Role, password string) error {
	name = NormalizeName(name)
	if err := CheckPassword(password); err != nil {
		return err
	}
	if role < Viewer || role > Admin {
		return fmt.Errorf("auth: invalid role %v", role)
	}
	hash := HashPassword(password, s.cfg.Params)
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := queries.New(tx).UserCreate(ctx, queries.UserCreateParams{Name: name, Role: role.String(), PasswordHash: hash}); err != nil {
			return err
		}
		return record(ctx, tx, actor, audit.ActionUserAdd, name, audit.OK, "")
	})
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "23505":
		return fmt.Errorf("%w: %q", ErrUserExists, name)
	case errors.As(err, &pgErr) && pgErr.Code == "23514":
		return fmt.Errorf("auth: invalid account name %q: 1 to 64 of a-z, 0-9, '.', '_', '@' and '-'", name)
	case err != nil:
		return fmt.Errorf("auth: add account %q: %w", name, err)
	}
	return nil
}

// SetPassword replaces an account's password and ends all its sessions,
// on every console instance, streams included.
func (s *Service) SetPassword(ctx context.Context, actor Principal, name, password string) error {
	name = NormalizeName(name)
	if err := CheckPassword(password); err != nil {
		return err
	}
	hash := HashPassword(password, s.cfg.Params)
	return s.changeAccount(ctx, actor, name, audit.ActionPasswordChange, func(q *queries.Queries) error {
		_, err := q.UserSetPassword(ctx, queries.UserSetPasswordParams{Name: name, PasswordHash: hash})
		return err
	})
}

// Disable stops an account from signing in and ends all its sessions.
// Disabling twice is not an error.
func (s *Service) Disable(ctx context.Context, actor Principal, name string) error {
	name = NormalizeName(name)
	return s.changeAccount(ctx, actor, name, audit.ActionUserDisable, func(q *queries.Queries) error {
		_, err := q.UserDisable(ctx, name)
		return err
	})
}

// changeAccount applies change, revokes every session of the account and
// audits action, in one transaction.
func (s *Service) changeAccount(ctx context.Context, actor Principal, name, action string, change func(*queries.Queries) error) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		q := queries.New(tx)
		if err := change(q); err != nil {
			return err
		}
		ids, err := q.SessionRevokeUser(ctx, name)
		if err != nil {
			return err
		}
		if err := revoked(ctx, tx, ids); err != nil {
			return err
		}
		return record(ctx, tx, actor, action, name, audit.OK, "")
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: %q", ErrNoUser, name)
	}
	if err != nil {
		return fmt.Errorf("auth: %s %q: %w", action, name, err)
	}
	return nil
}

// AccountsExist reports whether any enabled account exists: serving on a
// non-loopback address needs one.
func (s *Service) AccountsExist(ctx context.Context) (bool, error) {
	n, err := queries.New(s.pool).UserCountActive(ctx)
	if err != nil {
		return false, fmt.Errorf("auth: count accounts: %w", err)
	}
	return n > 0, nil
}

// ChangeOwnPassword is a signed-in account changing its own password: the
// current one must be right (a wrong one counts as a failed sign-in, and
// the throttle applies). Every session of the account ends, the caller's
// included; sign in again with the new password.
func (s *Service) ChangeOwnPassword(ctx context.Context, p Principal, current, next, addr string) error {
	if err := CheckPassword(next); err != nil {
		return err
	}
	from := client{key: "addr:" + addr}
	if err := s.admit(ctx, p.Name, addr, from); err != nil {
		return err
	}
	user, err := queries.New(s.pool).UserGetByName(ctx, p.Name)
	if err != nil {
		return fmt.Errorf("auth: change password of %q: %w", p.Name, err)
	}
	ok, _, err := s.checkPassword(ctx, p.Name, user.PasswordHash, current)
	if err != nil {
		return fmt.Errorf("auth: change password of %q: %w", p.Name, err)
	}
	if !ok {
		return s.failed(ctx, p.Name, addr)
	}
	if err := s.SetPassword(ctx, p, p.Name, next); err != nil {
		return err
	}
	// The attempt admit counted was not a failure.
	if err := queries.New(s.pool).LoginFailureClear(ctx, queries.LoginFailureClearParams{Account: p.Name, Client: from.key}); err != nil {
		return fmt.Errorf("auth: clear sign-in failures of %q: %w", p.Name, err)
	}
	return nil
}
