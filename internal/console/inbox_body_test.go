package console

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadBody: readBody returns the body whatever its announced length
// says, at most limit+1 bytes of it, and an error for a body that ends
// before its announced length.
func TestReadBody(t *testing.T) {
	t.Parallel()
	const limit = 10
	for _, tc := range []struct {
		name    string
		body    string
		length  int64 // Content-Length; -1: unknown
		want    string
		wantErr bool
	}{
		{"as announced", `{"a":1}`, 7, `{"a":1}`, false},
		{"empty", ``, 0, ``, false},
		{"length unknown", `{"a":1}`, -1, `{"a":1}`, false},
		{"longer than announced", `{"a":12345}`, 7, `{"a":12345}`, false},
		{"over the limit, unknown length", strings.Repeat("x", 20), -1, strings.Repeat("x", limit+1), false},
		{"over the limit, announced short", strings.Repeat("x", 20), 5, strings.Repeat("x", limit+1), false},
		{"at the limit", strings.Repeat("x", limit), limit, strings.Repeat("x", limit), false},
		{"shorter than announced", `{"a":1}`, 9, ``, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req := &http.Request{Body: io.NopCloser(strings.NewReader(tc.body)), ContentLength: tc.length}
			got, err := readBody(req, limit)
			if tc.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, string(got))
		})
	}
}
