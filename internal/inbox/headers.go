package inbox

import (
	"slices"
	"unicode/utf8"
)

// headersJSON is headers as the JSON object stored with the event (and
// passed to sql handlers): its names sorted, as encoding/json writes a map.
// It is written by hand because every event stores its headers: a
// reflecting encoder of a map was a measurable share of the receiver's CPU
// (BENCHMARKS.md, "The A/B of issues 10 and 15"). Nil headers are {}.
func headersJSON(headers map[string]string) []byte {
	names := make([]string, 0, len(headers))
	size := 2
	for name, value := range headers {
		names = append(names, name)
		size += len(name) + len(value) + 6
	}
	slices.Sort(names)
	b := make([]byte, 0, size)
	b = append(b, '{')
	for i, name := range names {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, name)
		b = append(b, ':')
		b = appendJSONString(b, headers[name])
	}
	return append(b, '}')
}

// appendJSONString appends s as a JSON string: quotes, backslashes and
// control characters escaped, and each byte of invalid UTF-8 replaced by
// U+FFFD, as encoding/json does (which also escapes <, > and &; JSON does
// not need that, and the stored text is never embedded in HTML as it is).
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, "\uFFFD"...)
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
