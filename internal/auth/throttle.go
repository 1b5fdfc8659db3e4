package auth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/internal/advisory"
	"github.com/switchyard/switchyard/internal/queries"
)

// Sign-in throttling. An attacker must slow only their own attempts, never
// lock the account's owner out, so nothing here is a hard lock: every
// limit is a delay after the latest failure that counts against it,
// doubling with each failure past a free allowance (BaseDelay, 2×, 4×, …,
// at most MaxDelay), and failures older than ThrottleWindow stop counting.
// Three delays apply, the longest wins:
//
//   - per account and client, always. The client is the browser's device
//     (a signed device cookie that a sign-in to that account set) or
//     else its address. An owner mistyping on their own browser is
//     delayed only by their own mistakes.
//   - per account, for clients without a device cookie: failures of the
//     account from every address, each address counting at most
//     FreeFailures, so that a guesser needs many addresses to slow the
//     account, and even then a browser that signed in before is exempt.
//   - per address, for clients without a device cookie: failures of every
//     account from that address (one address trying many names).
//
// A refused attempt is not counted, so the Retry-After it carries is the
// truth: an attempt at that time is admitted, unless new failures were
// counted meanwhile (by the attacker, against the attacker).

// Attempt is one sign-in attempt.
type Attempt struct {
	Name, Password string
	// Addr is the client's address (behind trusted proxies, the address
	// they forwarded).
	Addr string
	// Device is the device cookie the browser sent, "" if none. One that
	// does not verify, has expired or belongs to another account is
	// ignored.
	Device string
}

// ThrottledError means too many recent failures: an attempt after
// RetryAfter (whole seconds) is admitted.
type ThrottledError struct{ RetryAfter time.Duration }

func (e *ThrottledError) Error() string {
	return fmt.Sprintf("auth: too many failed sign-ins; retry after %v", e.RetryAfter)
}

// client is who an attempt's failures count against.
type client struct {
	key    string // "device:<id>" or "addr:<address>"
	device bool
}

// admit counts a sign-in attempt as a failure before its password is
// checked (a success clears the client's failures), under locks on the
// account and the client: concurrent guesses count against each other, so
// a burst of them gets no more tries than one after another.
func (s *Service) admit(ctx context.Context, name, addr string, c client) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := queries.New(tx)
		for _, key := range []int64{advisory.Key("switchyard.login.account", name), advisory.Key("switchyard.login.client", c.key)} {
			if err := q.LoginAttemptLock(ctx, key); err != nil {
				return fmt.Errorf("auth: lock sign-in attempts: %w", err)
			}
		}
		if err := s.checkThrottle(ctx, q, name, addr, c); err != nil {
			return err
		}
		if err := q.LoginFailureRecord(ctx, queries.LoginFailureRecordParams{Account: name, Address: addr, Client: c.key}); err != nil {
			return fmt.Errorf("auth: count sign-in attempt: %w", err)
		}
		return nil
	})
}

// checkThrottle refuses an attempt while any delay that applies to it
// runs, with the time until the longest ends.
func (s *Service) checkThrottle(ctx context.Context, q *queries.Queries, name, addr string, c client) error {
	t, err := q.LoginThrottleGet(ctx, queries.LoginThrottleGetParams{
		Account: name, Client: c.key, Address: addr,
		WindowSeconds: s.cfg.ThrottleWindow.Seconds(), AddressCap: int32(s.cfg.FreeFailures),
	})
	if err != nil {
		return fmt.Errorf("auth: check sign-in throttle: %w", err)
	}
	until := t.PairLast.Add(s.delay(int(t.PairFailures), s.cfg.FreeFailures))
	if !c.device {
		until = latest(until,
			t.AccountLast.Add(s.delay(int(t.AccountFailures), s.cfg.AccountFreeFailures)),
			t.AddressLast.Add(s.delay(int(t.AddressFailures), s.cfg.AddressFreeFailures)))
	}
	if wait := until.Sub(t.Now); wait > 0 {
		return &ThrottledError{RetryAfter: time.Duration(math.Ceil(wait.Seconds())) * time.Second}
	}
	return nil
}

// delay is how long after the latest of failures an attempt waits when
// free of them carry no delay: none below free, then BaseDelay doubling
// with each further failure, at most MaxDelay.
func (s *Service) delay(failures, free int) time.Duration {
	if failures < free {
		return 0
	}
	n := failures - free
	if n >= 40 {
		return s.cfg.MaxDelay
	}
	return min(s.cfg.BaseDelay<<n, s.cfg.MaxDelay)
}

func latest(t time.Time, more ...time.Time) time.Time {
	for _, u := range more {
		if u.After(t) {
			t = u
		}
	}
	return t
}

// Device cookies: "<issued unix seconds>.<id>.<mac>", the mac an
// HMAC-SHA256, under the database's device key, of the account name, the
// issue time and the id. A cookie is bound to one account: it exempts a
// browser from that account's account-wide and address-wide delays, and
// gives it delays of its own.

// deviceKey returns the key device cookies are signed with, read from the
// database once.
func (s *Service) deviceKey(ctx context.Context) ([]byte, error) {
	s.keyMu.Lock()
	defer s.keyMu.Unlock()
	if s.devKey != nil {
		return s.devKey, nil
	}
	key, err := queries.New(s.pool).AuthKeyGet(ctx, "device")
	if err != nil {
		return nil, fmt.Errorf("auth: read device key: %w", err)
	}
	s.devKey = key
	return key, nil
}

func deviceMAC(key []byte, account, issued, id string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("switchyard device v1\x00" + account + "\x00" + issued + "\x00" + id))
	return m.Sum(nil)
}

// newDevice returns a device cookie value for account, issued now.
func (s *Service) newDevice(ctx context.Context, account string) (string, error) {
	key, err := s.deviceKey(ctx)
	if err != nil {
		return "", err
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (Go 1.24+ panics instead)
	id := base64.RawURLEncoding.EncodeToString(b)
	issued := strconv.FormatInt(s.cfg.Now().Unix(), 10)
	return issued + "." + id + "." + base64.RawURLEncoding.EncodeToString(deviceMAC(key, account, issued, id)), nil
}

// clientOf returns whom attempt a's failures count against: its device,
// when it carries a valid device cookie for account, else its address.
func (s *Service) clientOf(ctx context.Context, account string, a Attempt) (client, error) {
	byAddr := client{key: "addr:" + a.Addr}
	parts := strings.Split(a.Device, ".")
	if len(parts) != 3 {
		return byAddr, nil
	}
	issued, err := strconv.ParseInt(parts[0], 10, 64)
	mac, err2 := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || err2 != nil {
		return byAddr, nil
	}
	key, err := s.deviceKey(ctx)
	if err != nil {
		return client{}, err
	}
	if !hmac.Equal(mac, deviceMAC(key, account, parts[0], parts[1])) {
		return byAddr, nil
	}
	if age := s.cfg.Now().Sub(time.Unix(issued, 0)); age < 0 || age > s.cfg.DeviceLifetime {
		return byAddr, nil
	}
	return client{key: "device:" + parts[1], device: true}, nil
}
