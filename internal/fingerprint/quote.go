package fingerprint

import "strings"

// quotedPlaceholder replaces the text between a pair of quotes.
const quotedPlaceholder = "<q>"

// replaceQuoted replaces the content of quoted values with <q>, keeping the
// quotes: "order 42" and 'abc' become "<q>" and '<q>'. A double quote pairs
// with the next double quote. A single quote opens only at the start or
// after a character that is not part of a word, and closes at the next
// single quote not followed by a word character, so the apostrophes in
// "can't" or "users'" are left alone. A quote without a partner is kept as
// it is. A quoted URL is kept, since its query was already replaced and its
// host and path say which endpoint failed.
func replaceQuoted(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		end := closingQuote(s, i)
		if end < 0 {
			b.WriteByte(s[i])
			i++
			continue
		}
		inner := s[i+1 : end]
		if urlPrefixRE.MatchString(inner) {
			b.WriteString(s[i : end+1])
		} else {
			b.WriteByte(s[i])
			b.WriteString(quotedPlaceholder)
			b.WriteByte(s[end])
		}
		i = end + 1
	}
	return b.String()
}

// closingQuote returns the index of the quote that closes a quoted value
// opened at s[i], or -1 when s[i] does not open one.
func closingQuote(s string, i int) int {
	switch s[i] {
	case '"':
		if j := strings.IndexByte(s[i+1:], '"'); j >= 0 {
			return i + 1 + j
		}
	case '\'':
		if i > 0 && isWordByte(s[i-1]) {
			return -1
		}
		for j := i + 1; j < len(s); j++ {
			if s[j] == '\'' && (j+1 == len(s) || !isWordByte(s[j+1])) {
				return j
			}
		}
	}
	return -1
}

// isWordByte reports whether c is an ASCII letter, digit or underscore, the
// characters of a word for \b in the rules.
func isWordByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
