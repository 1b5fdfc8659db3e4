package auth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"
)

// Params are argon2id's cost parameters. Every hash records the ones it
// was made with, so raising them later leaves existing hashes valid; a hash
// made with weaker ones is replaced at its next successful sign-in.
type Params struct {
	Time      uint32 // passes over memory
	MemoryKiB uint32
	Threads   uint8
	KeyLen    uint32
}

// DefaultParams meet OWASP's argon2id minimum (t=2, m=19 MiB, p=1).
var DefaultParams = Params{Time: 2, MemoryKiB: 19 * 1024, Threads: 1, KeyLen: 32}

// Password length limits. The lower bound is in characters; the upper one
// in bytes only bounds the work an attacker can ask for (argon2 has no
// 72-byte truncation, unlike bcrypt).
const (
	MinPasswordChars = 12
	MaxPasswordBytes = 1024
)

// ErrWeakPassword is returned for a password outside the limits.
var ErrWeakPassword = errors.New("auth: password must be at least 12 characters (and at most 1024 bytes)")

// errMalformedHash means a stored hash is not one this package wrote.
var errMalformedHash = errors.New("auth: malformed password hash")

// CheckPassword reports whether password meets the limits.
func CheckPassword(password string) error {
	if utf8.RuneCountInString(password) < MinPasswordChars || len(password) > MaxPasswordBytes || !utf8.ValidString(password) {
		return ErrWeakPassword
	}
	return nil
}

// HashPassword returns the PHC string of password under p:
// $argon2id$v=19$m=<KiB>,t=<time>,p=<threads>$<salt>$<key> (unpadded
// base64), with a fresh 16-byte salt.
func HashPassword(password string, p Params) string {
	salt := make([]byte, 16)
	_, _ = rand.Read(salt) // never fails (Go 1.24+ panics instead)
	key := argon2.IDKey([]byte(password), salt, p.Time, p.MemoryKiB, p.Threads, p.KeyLen)
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, p.MemoryKiB, p.Time, p.Threads, b64.EncodeToString(salt), b64.EncodeToString(key))
}

// VerifyPassword reports whether password matches encoded, and the
// parameters encoded was made with. The comparison takes constant time.
func VerifyPassword(encoded, password string) (bool, Params, error) {
	p, salt, key, err := decodeHash(encoded)
	if err != nil {
		return false, Params{}, err
	}
	got := argon2.IDKey([]byte(password), salt, p.Time, p.MemoryKiB, p.Threads, p.KeyLen)
	return subtle.ConstantTimeCompare(got, key) == 1, p, nil
}

func decodeHash(encoded string) (Params, []byte, []byte, error) {
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return Params{}, nil, nil, errMalformedHash
	}
	var version int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return Params{}, nil, nil, fmt.Errorf("%w: version %q", errMalformedHash, parts[2])
	}
	var p Params
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &p.MemoryKiB, &p.Time, &p.Threads); err != nil {
		return Params{}, nil, nil, fmt.Errorf("%w: parameters %q", errMalformedHash, parts[3])
	}
	b64 := base64.RawStdEncoding
	salt, err1 := b64.DecodeString(parts[4])
	key, err2 := b64.DecodeString(parts[5])
	if err1 != nil || err2 != nil || len(salt) < 8 || len(key) < 16 || p.Time == 0 || p.MemoryKiB == 0 || p.Threads == 0 {
		return Params{}, nil, nil, errMalformedHash
	}
	p.KeyLen = uint32(len(key))
	return p, salt, key, nil
}

// work is what one argon2id computation under p costs, near enough: the
// KiB of memory it fills, over all its passes.
func (p Params) work() int64 { return int64(p.Time) * int64(p.MemoryKiB) }

// padding returns the parameters of the extra argon2id computation that
// brings a verification under p up to the work of one under want, and
// false when there is nothing (worth) making up: p costs as much already,
// or the gap is below argon2id's least memory. The padding runs want's
// passes over less memory, so it never needs more memory than want.
func padding(p, want Params) (Params, bool) {
	gap := want.work() - p.work()
	if gap <= 0 || want.Time == 0 {
		return Params{}, false
	}
	m := gap / int64(want.Time)
	if m < 8*int64(max(want.Threads, 1)) {
		return Params{}, false
	}
	return Params{Time: want.Time, MemoryKiB: uint32(m), Threads: want.Threads, KeyLen: want.KeyLen}, true
}

// weaker reports whether p costs less than want in any dimension.
func (p Params) weaker(want Params) bool {
	return p.Time < want.Time || p.MemoryKiB < want.MemoryKiB || p.Threads < want.Threads || p.KeyLen < want.KeyLen
}
