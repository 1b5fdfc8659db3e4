package fingerprint

import (
	"regexp"
	"strings"
)

// The rules' patterns, compiled once and only read afterwards. They run on
// lowercased text, so they name lowercase letters only.
var (
	// urlRE: scheme://rest, then the query and fragment, which are values.
	// No \b before the scheme: a digit before it becomes <n>, and the
	// match must not depend on which.
	urlRE       = regexp.MustCompile(`([a-z][a-z0-9+.-]*://[^\s"'?#]*)([?#][^\s"']*)?`)
	urlPrefixRE = regexp.MustCompile(`^[a-z][a-z0-9+.-]*://`)
	// emailRE: the domain runs to the end of its last label, so the match
	// does not depend on what follows it.
	emailRE = regexp.MustCompile(`[a-z0-9._%+-]+@[a-z0-9-]+(?:\.[a-z0-9-]+)+`)
	uuidRE  = regexp.MustCompile(`\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`)
	// timestampRE: an ISO 8601 / RFC 3339 date with an optional time and
	// zone (T or a space between them), or a time of day alone.
	timestampRE = regexp.MustCompile(`\b\d{4}-\d{2}-\d{2}(?:[t ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:z\b|[+-]\d{2}(?::?\d{2})?\b)?)?|\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b`)
	// ipv4RE takes a port along: 10.0.0.7:443 and 10.0.0.9:8443 group.
	ipv4RE = regexp.MustCompile(`\b\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?\b`)
	// ipv6RE: a bracketed address with an optional port, or a run of hex
	// digits, colons and dots; replaceIPv6 keeps the runs that are not
	// addresses (std::io).
	ipv6RE = regexp.MustCompile(`\[[0-9a-f:.]*:[0-9a-f:.%a-z]*\](?::\d{1,5})?|[0-9a-f:.]*:[0-9a-f:.]*:[0-9a-f:.]*`)
	hexRE  = regexp.MustCompile(`\b(?:0x[0-9a-f]+|[0-9a-f]{8,})\b`)
	wordRE = regexp.MustCompile(`\b\w{10,}\b`)
	// durationRE: Go durations (1h2m3.5s, 87ms, 250µs) and a number with
	// a spelled-out unit (30 seconds).
	durationRE = regexp.MustCompile(`\b(?:\d+(?:\.\d+)?(?:ns|us|µs|ms|s|m|h))+\b|\b\d+(?:\.\d+)? ?(?:milliseconds?|seconds?|secs?|minutes?|mins?|hours?)\b`)
	// numberRE: a number, with the word before it when that word says the
	// number is an HTTP status (replaceNumbers keeps those).
	numberRE = regexp.MustCompile(`(?:\b(?:http(?:/\d+(?:\.\d+)?)?|status(?: code)?)[ :=]+)?(\d+(?:\.\d+)*)`)
	digitsRE = regexp.MustCompile(`\d+(?:\.\d+)*`)
)

// replaceSubmatches replaces every match of re in s with fn(submatches),
// where submatches[0] is the whole match and unmatched groups are "".
func replaceSubmatches(re *regexp.Regexp, s string, fn func(m []string) string) string {
	locs := re.FindAllStringSubmatchIndex(s, -1)
	if locs == nil {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for _, loc := range locs {
		m := make([]string, len(loc)/2)
		for i := range m {
			if loc[2*i] >= 0 {
				m[i] = s[loc[2*i]:loc[2*i+1]]
			}
		}
		b.WriteString(s[last:loc[0]])
		b.WriteString(fn(m))
		last = loc[1]
	}
	b.WriteString(s[last:])
	return b.String()
}

// replaceURLQuery keeps a URL's scheme, host and path (its numbers are
// replaced by later rules) and replaces its query and fragment.
func replaceURLQuery(s string) string {
	return replaceSubmatches(urlRE, s, func(m []string) string {
		if m[2] == "" {
			return m[0]
		}
		return m[1] + "?<query>"
	})
}

// replaceIPv6 replaces IPv6 addresses: bracketed ones, and runs with at
// least two colons and a digit (so "std::io" and "a:b:c" stay). Dots and a
// single colon that end an unbracketed run are punctuation, not address.
func replaceIPv6(s string) string {
	return ipv6RE.ReplaceAllStringFunc(s, func(m string) string {
		if strings.HasPrefix(m, "[") {
			return "<ip>"
		}
		addr := strings.TrimRight(m, ".")
		if strings.HasSuffix(addr, ":") && !strings.HasSuffix(addr, "::") {
			addr = addr[:len(addr)-1]
		}
		if strings.Count(addr, ":") >= 2 && strings.ContainsAny(addr, "0123456789") {
			return "<ip>" + m[len(addr):]
		}
		return m
	})
}

// replaceHex replaces 0x-prefixed numbers and hex strings of 8 or more
// digits that mix letters and digits (a run of digits alone is a number;
// a run of letters alone, like "deadbeef" or "acceded", is a word).
func replaceHex(s string) string {
	return hexRE.ReplaceAllStringFunc(s, func(m string) string {
		if strings.HasPrefix(m, "0x") || hasDigits(m, 1) && strings.ContainsAny(m, "abcdef") {
			return "<hex>"
		}
		return m
	})
}

// replaceID replaces words of 10 or more characters that hold a letter and
// at least two digits: the shape of generated ids (ULIDs, ch_3Mq…, KSUIDs)
// rather than of words (sha256, utf8mb4 are shorter or have fewer digits).
func replaceID(s string) string {
	return wordRE.ReplaceAllStringFunc(s, func(m string) string {
		if hasDigits(m, 2) && strings.ContainsAny(m, "abcdefghijklmnopqrstuvwxyz") {
			return "<id>"
		}
		return m
	})
}

// replaceNumbers replaces every remaining number by <n>, except a 3-digit
// HTTP status (100-599) right after "http", "http/1.1", "status" or
// "status code", which is kept with the words before it.
func replaceNumbers(s string) string {
	return replaceSubmatches(numberRE, s, func(m []string) string {
		whole, num := m[0], m[1]
		if len(whole) > len(num) && len(num) == 3 && num[0] >= '1' && num[0] <= '5' {
			return whole
		}
		// Not a status: the protocol version before it is a number too.
		prefix := digitsRE.ReplaceAllLiteralString(whole[:len(whole)-len(num)], "<n>")
		return prefix + "<n>"
	})
}

// hasDigits reports whether s holds at least n ASCII digits.
func hasDigits(s string, n int) bool {
	count := 0
	for i := 0; i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' {
			count++
		}
	}
	return count >= n
}
