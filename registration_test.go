package switchyard

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/inbox"
)

// A Registration's Once reaches the inbox as it was given: called with
// the event and the claim's values, its event id and error passed back;
// a Registration without one has none there either.
func TestRegistrationOnceReachesTheInbox(t *testing.T) {
	t.Parallel()
	failed := errors.New("statement failed")
	var got []any
	hs := Handlers{
		"fast": {Once: func(_ context.Context, _ *pgxpool.Pool, ev Event, c Claim) (int64, error) {
			got = append(got, ev.Source, ev.ID, string(ev.Payload), c)
			return 7, failed
		}},
	}.Handle("plain", nil)
	reg := hs.internal()
	require.Nil(t, reg["plain"].Once)
	row, err := reg["fast"].Once(context.Background(), nil,
		inbox.Event{Source: "crm", ID: "evt_1", Payload: []byte(`{}`)},
		inbox.Claim{Source: "crm", EventID: "evt_1", Headers: []byte(`{"a":"b"}`), Payload: []byte(`{}`), Slot: 3})
	require.ErrorIs(t, err, failed)
	require.Equal(t, int64(7), row)
	require.Equal(t, []any{"crm", "evt_1", `{}`, Claim{Source: "crm", EventID: "evt_1", Headers: []byte(`{"a":"b"}`), Payload: []byte(`{}`), Slot: 3}}, got)
}
