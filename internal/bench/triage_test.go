package bench

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTriageBenchOptions(t *testing.T) {
	t.Parallel()
	o, err := parseTriageBenchOptions([]string{"--clients", "10", "--mutations", "5"})
	require.NoError(t, err)
	require.Equal(t, 10, o.clients)
	require.Equal(t, 20, o.rate)
	_, err = parseTriageBenchOptions([]string{"--clients", "0"})
	require.Error(t, err)
}
