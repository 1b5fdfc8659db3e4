package msgfilter

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPrefixUpperIsTheLeastStringAboveThePrefix(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		prefix, upper string
		ok            bool
	}{
		{"order.", "order/", true},
		{"a", "b", true},
		{"caf\u00e9", "caf\u00ea", true},
		{"x\u007f", "x\u0080", true},
		{"x\ud7ff", "x\ue000", true}, // no surrogates in UTF-8
		{"x\U0010FFFF", "", false},
		{"bad\xff", "", false},
	} {
		upper, ok := prefixUpper(c.prefix)
		require.Equal(t, c.ok, ok, "%q", c.prefix)
		require.Equal(t, c.upper, upper, "%q", c.prefix)
	}
}

func TestParseNameReadsAPrefixByItsEnd(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in, exact, prefix, canonical string
	}{
		{"order.created", "order.created", "", "order.created"},
		{"order.", "", "order.", "order.*"},
		{"order.*", "", "order.", "order.*"},
		{"shop-*", "", "shop-", "shop-*"},
		{"*", "", "", ""},
		{"", "", "", ""},
	} {
		n, err := ParseName(c.in)
		require.NoError(t, err)
		require.Equal(t, c.exact, deref(n.Exact), c.in)
		require.Equal(t, c.prefix, deref(n.Prefix), c.in)
		require.Equal(t, n.Prefix != nil, n.Upper != nil, c.in)
		require.Equal(t, c.canonical, CanonicalName(c.in), c.in)
	}
	_, err := ParseName("x\U0010FFFF*")
	require.ErrorIs(t, err, ErrNoUpperBound)
}

func TestErrorPatternMatchesItself(t *testing.T) {
	t.Parallel()
	require.Nil(t, ErrorPattern(""))
	require.Equal(t, `50\% of a\_b \\ c`, deref(ErrorPattern(`50% of a_b \ c`)))
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
