// Package pgtext makes text from outside storable in a PostgreSQL text
// column: PostgreSQL refuses a NUL and invalid UTF-8, and a write that
// fails on them loses what it was recording (an error, a refusal, a
// response), so such text is cleaned rather than refused.
package pgtext

import (
	"strings"
	"unicode/utf8"
)

// Clean returns s as valid UTF-8 without NUL (each invalid sequence and
// each NUL becomes U+FFFD) and at most maxBytes long, cut at a character
// boundary.
func Clean(s string, maxBytes int) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
	for len(s) > maxBytes {
		_, size := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-size]
	}
	return s
}

// Valid reports whether s can be stored as it is: valid UTF-8 without NUL.
func Valid(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}
