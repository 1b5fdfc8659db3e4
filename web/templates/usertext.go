package templates

import (
	"fmt"
	"strings"
)

// Text that users or outside systems chose (topics, aggregates, names,
// headers, reasons, errors) is shown isolated and with its control
// characters visible: a right-to-left override (U+202E) in a topic would
// otherwise reorder the text after it, on the page and in a copied line,
// and a zero-width or control character would hide what a value holds.
// Templates write such a value as <bdi>{ Shown(v) }</bdi>: <bdi> isolates
// its content's direction (unicode-bidi: isolate, from the browser's own
// stylesheet: no inline style, nothing for the CSP to refuse), and Shown
// leaves no control character for it to isolate.

// Shown returns text with every control character made visible: C0
// controls as their Unicode control pictures (␀, ␛, …; tab and line
// breaks are kept, they lay out text), DEL as ␡, and the bidi and other
// invisible format characters as ⟨U+XXXX⟩.
func Shown(text string) string {
	if !strings.ContainsFunc(text, hidden) {
		return text
	}
	var b strings.Builder
	for _, r := range text {
		switch {
		case r == '\t' || r == '\n' || r == '\r':
			b.WriteRune(r)
		case r < 0x20:
			b.WriteRune(0x2400 + r)
		case r == 0x7f:
			b.WriteRune('␡')
		case hidden(r):
			fmt.Fprintf(&b, "⟨U+%04X⟩", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// hidden reports whether r is a control or invisible format character.
func hidden(r rune) bool {
	switch {
	case r < 0x20 && r != '\t' && r != '\n' && r != '\r', r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x180e, r >= 0x200b && r <= 0x200f, r >= 0x2028 && r <= 0x202e,
		r >= 0x2060 && r <= 0x206f, r == 0xfeff, r >= 0xfff9 && r <= 0xfffb:
		return true
	}
	return false
}
