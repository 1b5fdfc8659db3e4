package pgtext

import (
	"strings"
	"testing"
)

func TestClean(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		max  int
		want string
	}{
		{"plain", 10, "plain"},
		{"a\x00b", 10, "a\uFFFDb"},
		{"a\xffb", 10, "a\uFFFDb"},
		{"héllo", 2, "h"}, // é is two bytes: cut before it, never through it
		{strings.Repeat("x", 5), 3, "xxx"},
	} {
		if got := Clean(tc.in, tc.max); got != tc.want {
			t.Errorf("Clean(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
		}
		if !Valid(Clean(tc.in, tc.max)) {
			t.Errorf("Clean(%q) is not storable", tc.in)
		}
	}
	if Valid("a\x00") || Valid("\xff") || !Valid("ok") {
		t.Error("Valid misjudges")
	}
}
