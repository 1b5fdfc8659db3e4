// Package fingerprint groups failures by the shape of their error text.
//
// Normalize rewrites an error message so that messages which differ only in
// values (numbers, ids, timestamps, addresses, durations, quoted values,
// query strings) become the same text, with placeholders such as <n>, <ip>
// or <uuid> where the values were; Of hashes that text into a short, stable
// key. The console groups dead letters and inbox failures by the key and
// shows the normalised text as the group's shape.
//
// The rules keep what tells causes apart: a 3-digit HTTP status after
// "http", "http/1.1" or "status" is kept, so an HTTP 503 and an HTTP 404
// stay apart; words without digits are kept; a quoted URL keeps its host
// and path. Anything quoted is taken for a value, which also merges quoted
// names (a constraint "orders_pkey" and "users_pkey" group together): the
// price of not splitting on quoted input values. Changing a rule changes keys,
// which splits existing groups: TestOfStable pins one key so that such a
// change is a deliberate one.
package fingerprint

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode/utf8"
)

// Bounds on the work and the result.
const (
	// MaxInput is how many bytes of an error message are considered;
	// the rest is ignored.
	MaxInput = 4096
	// MaxLen bounds the length in bytes of Normalize's result. Text cut
	// at this bound ends with Ellipsis.
	MaxLen = 512
	// Ellipsis ends a normalised text that was cut at MaxLen.
	Ellipsis = "…"
)

// Of returns the fingerprint of an error message: the first 16 hex digits
// (64 bits) of the SHA-256 of Normalize(errText). Messages with the same
// normalised text have the same fingerprint, and the fingerprint of a given
// text never changes unless the rules do. Of is safe for concurrent use.
func Of(errText string) string {
	sum := sha256.Sum256([]byte(Normalize(errText)))
	return hex.EncodeToString(sum[:8])
}

// Normalize returns the shape of an error message: its first MaxInput bytes,
// made valid UTF-8, lowercased, with runs of white space collapsed to one
// space, values replaced by placeholders, and cut to at most MaxLen bytes at
// a word boundary. Placeholders:
//
//	<uuid>  UUIDs                       <email> e-mail addresses
//	<ts>    dates, times, RFC 3339      <ip>    IPv4 (with port) and IPv6
//	<hex>   0x… and long hex strings    <id>    long words with digits
//	<dur>   durations (1.5s, 87ms)      <n>     any other number
//	"<q>"   quoted values               ?<query> a URL's query and fragment
//
// Normalize is idempotent: Normalize(Normalize(x)) == Normalize(x). It is
// safe for concurrent use.
func Normalize(errText string) string {
	if len(errText) > MaxInput {
		errText = errText[:MaxInput]
	}
	s := strings.ToLower(strings.ToValidUTF8(errText, "\uFFFD"))
	s = strings.Join(strings.Fields(s), " ")
	return fit(rewrite(s))
}

// rewrite applies every rule, in order, to lowercased, space-collapsed
// text. The order matters: specific shapes (a UUID, a timestamp, an IP
// address) are replaced before their digits would be taken as numbers, and
// quoted values go last, once the text around them is final. Each rule's
// output is a fixed point of every rule (placeholders hold no digits, no
// quotes, no '@' and no "://"), which is what makes Normalize idempotent.
//
// Each rule is skipped when s lacks a character all its matches need: most
// error texts are short and plain, and the regular expressions are the
// whole cost.
func rewrite(s string) string {
	if strings.Contains(s, "://") {
		s = replaceURLQuery(s)
	}
	if strings.Contains(s, "@") {
		s = emailRE.ReplaceAllLiteralString(s, "<email>")
	}
	if strings.Contains(s, "-") {
		s = uuidRE.ReplaceAllLiteralString(s, "<uuid>")
	}
	digits := strings.ContainsAny(s, "0123456789")
	if digits {
		s = timestampRE.ReplaceAllLiteralString(s, "<ts>")
		s = ipv4RE.ReplaceAllLiteralString(s, "<ip>")
	}
	if strings.Contains(s, ":") {
		s = replaceIPv6(s)
	}
	if digits {
		s = replaceHex(s)
		s = replaceID(s)
		s = durationRE.ReplaceAllLiteralString(s, "<dur>")
		s = replaceNumbers(s)
	}
	return replaceQuoted(s)
}

// fit cuts s to MaxLen bytes and marks the cut with Ellipsis. It cuts
// between words, so that every word kept is whole and the result normalises
// to itself. A first word longer than the bound is cut inside, at the
// longest of a few cuts that normalises to itself (cutting "status=503"
// after "status=50" would not: 50 becomes <n>); failing that, only the
// Ellipsis is left.
func fit(s string) string {
	if len(s) <= MaxLen {
		return s
	}
	const suffix = " " + Ellipsis
	limit := MaxLen - len(suffix)
	if i := strings.LastIndexByte(s[:limit+1], ' '); i > 0 {
		return s[:i] + suffix
	}
	head := s[:limit]
	for range 8 {
		for !utf8.ValidString(head) {
			head = head[:len(head)-1]
		}
		if rewrite(head) == head {
			return head + suffix
		}
		head = head[:len(head)-1]
	}
	return Ellipsis
}
