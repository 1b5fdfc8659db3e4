package changefeed

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/testwait"
)

// Many concurrent pokes fold into few NOTIFYs, and a commit before them is
// always covered by one.
func TestNotifierCoalescesPokesAndWakesListeners(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	l := NewListener(pool, Config{From: &Cursor{}, PollInterval: time.Hour})
	firstRead := make(chan struct{})
	var once sync.Once
	l.onRead = func(bool, error) { once.Do(func() { close(firstRead) }) }
	start(t, l)
	<-firstRead // the catch-up after connecting is done: only a wake-up delivers now
	c := newCollector()
	_, cancel := l.Subscribe(c.receive)
	defer cancel()

	n := NewNotifier(pool, nil)
	require.NoError(t, n.Start(context.Background()))
	require.ErrorIs(t, n.Start(context.Background()), ErrStarted)
	t.Cleanup(n.Stop)

	appendCommitted(t, pool, "k", "poked")
	testwait.Together(200, func(int) { n.Poke() })
	require.Equal(t, []string{"poked"}, subjects(c.waitFor(t, 1, 10*time.Second)), "no poll: the notification woke the listener")
	n.Stop()
	n.Stop()
}
