package inbox

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// The stored headers must read back as encoding/json's encoding of them
// reads back: the same names and values, invalid UTF-8 as U+FFFD.
func TestHeadersJSONReadsBackAsEncodingJSON(t *testing.T) {
	for _, headers := range []map[string]string{
		nil,
		{},
		{"webhook-id": "msg_1", "content-type": "application/json"},
		{"x-quote": `a "quoted" \ value`, "x-ctl": "tab\there\nnew\rline\x00nul\x1f\x7f"},
		{"x-html": "<script>&</script>", "x-utf8": "été \u2028 \U0001F600", "x-bad": "a\xffb\xc3(c\xed\xa0\x80"},
	} {
		got := headersJSON(headers)
		require.True(t, json.Valid(got), "%q", got)
		want, err := json.Marshal(headers)
		require.NoError(t, err)
		if headers == nil {
			want = []byte("{}")
		}
		var gotMap, wantMap map[string]string
		require.NoError(t, json.Unmarshal(got, &gotMap))
		require.NoError(t, json.Unmarshal(want, &wantMap))
		require.Equal(t, wantMap, gotMap, "%q", got)
	}
}

func FuzzHeadersJSON(f *testing.F) {
	f.Add("name", "value")
	f.Add("a\"\\", "\x00\xff\u2028")
	f.Fuzz(func(t *testing.T, name, value string) {
		headers := map[string]string{name: value, "other": name}
		got := headersJSON(headers)
		want, err := json.Marshal(headers)
		require.NoError(t, err)
		var gotMap, wantMap map[string]string
		require.NoError(t, json.Unmarshal(got, &gotMap), "%q", got)
		require.NoError(t, json.Unmarshal(want, &wantMap))
		require.Equal(t, wantMap, gotMap)
	})
}
