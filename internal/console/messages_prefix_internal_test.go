package console

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

func TestNameFilterReadsAPrefixByItsEnd(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in, exact, prefix string
	}{
		{"order.created", "order.created", ""},
		{"order.", "", "order."},
		{"order.*", "", "order."},
		{"shop-*", "", "shop-"},
		{"*", "", ""},
		{"", "", ""},
	} {
		exact, prefix, upper, err := nameFilter(c.in, "topic")
		require.NoError(t, err)
		require.Equal(t, c.exact, deref(exact), c.in)
		require.Equal(t, c.prefix, deref(prefix), c.in)
		require.Equal(t, prefix != nil, upper != nil, c.in)
	}
	_, _, _, err := nameFilter("x\U0010FFFF*", "topic")
	require.Error(t, err)
}
