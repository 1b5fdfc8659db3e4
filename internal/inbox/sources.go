package inbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/switchyard/switchyard/internal/queries"
)

// DefaultReloadInterval is how often Watch rereads
// switchyard.inbox_sources, as the dispatcher rereads destinations: a
// source added there, changed, or given another list of secrets is used
// by every instance within this interval, without a restart.
const DefaultReloadInterval = 10 * time.Second

// Load reads switchyard.inbox_sources and replaces the receiver's sources
// with them. A source that cannot be set up (a missing secret, a bad one,
// an unknown handler) answers ErrMisconfigured to its senders, who retry,
// until an operator fixes its row; it is logged when it first appears or
// changes. Load is safe to call concurrently with Accept.
func (r *Receiver) Load(ctx context.Context) error {
	rows, err := queries.New(r.cfg.Pool).InboxSourceList(ctx)
	if err != nil {
		return fmt.Errorf("load inbox sources: %w", err)
	}
	r.loadMu.Lock()
	defer r.loadMu.Unlock()
	changed := r.rows == nil || len(rows) != len(r.rows)
	next := make(map[string]queries.SwitchyardInboxSource, len(rows))
	sources := make([]Source, 0, len(rows))
	for _, row := range rows {
		next[row.Name] = row
		src := SourceFromRow(row, r.cfg.Getenv)
		sources = append(sources, src)
		if prev, ok := r.rows[row.Name]; ok && sameSourceRow(prev, row) {
			continue
		}
		changed = true
		if _, ok := r.registration(src); !ok && src.Problem == nil {
			src.Problem = fmt.Errorf("no handler named %q is registered", src.Handler)
		}
		if src.Problem != nil {
			r.cfg.Logger.Error("inbox source misconfigured: its requests get 503", slog.String("source", row.Name), slog.Any("error", src.Problem))
		}
	}
	if !changed {
		return nil
	}
	r.rows = next
	r.setSources(sources)
	r.cfg.Reloaded()
	return nil
}

// Watch calls Load every ReceiverConfig.ReloadInterval until ctx ends. A
// failed reread is logged and keeps the current sources.
func (r *Receiver) Watch(ctx context.Context) {
	tick := time.NewTicker(r.cfg.ReloadInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := r.Load(qctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			r.cfg.Logger.Warn("reload inbox sources failed; keeping the current ones", slog.Any("error", err))
		}
	}
}

// ErrDisabled is the Problem of a source disabled on the configuration
// page.
var ErrDisabled = errors.New("inbox: source disabled")

// SourceFromRow is the Source an inbox_sources row describes, with its
// secrets read through getenv and, when its handler is a built-in one
// (HandlerForward, HandlerSQL), that handler. A secret that is not set, a
// scheme or secret the verifier refuses, or a built-in handler's setting
// that is wrong leaves the source with a Problem.
func SourceFromRow(row queries.SwitchyardInboxSource, getenv func(string) string) Source {
	src := Source{
		Name: row.Name, Scheme: row.Scheme, Handler: row.Handler,
		Policy: Policy{OutOfOrder: OutOfOrder(row.OutOfOrder), MaxAttempts: int(row.MaxAttempts)},
	}
	if row.Disabled {
		// Disabled on the configuration page: senders get 503 and retry
		// later; nothing is recorded meanwhile.
		src.Problem = ErrDisabled
		return src
	}
	secrets := make([]string, 0, len(row.SecretRefs))
	for _, ref := range row.SecretRefs {
		secret := getenv(ref)
		if secret == "" {
			src.Problem = fmt.Errorf("signing secret: environment variable %s is empty", ref)
			return src
		}
		secrets = append(secrets, secret)
	}
	src.Verifier, src.Problem = NewVerifier(row.Scheme, secrets, time.Duration(row.ToleranceSeconds)*time.Second)
	if reg, ok, err := builtin(row); ok && src.Problem == nil {
		src.Builtin, src.Problem = &reg, err
	}
	return src
}

// sameSourceRow reports whether two reads of a source's row agree.
func sameSourceRow(a, b queries.SwitchyardInboxSource) bool {
	return a.Name == b.Name && a.Scheme == b.Scheme && slices.Equal(a.SecretRefs, b.SecretRefs) &&
		a.ToleranceSeconds == b.ToleranceSeconds && a.OutOfOrder == b.OutOfOrder && a.Handler == b.Handler &&
		a.MaxAttempts == b.MaxAttempts && a.ForwardTo == b.ForwardTo && a.EntityField == b.EntityField &&
		a.SqlFunction == b.SqlFunction && a.CreatedAt.Equal(b.CreatedAt) && a.UpdatedAt.Equal(b.UpdatedAt)
}
