package jetstream

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"
)

// DefaultCheckTimeout bounds CheckCapture when its ctx has no earlier
// deadline: the configuration page waits for it.
const DefaultCheckTimeout = 3 * time.Second

// CheckCapture asks the JetStream API whether a stream captures every
// subject a destination of cfg publishes to (cfg.SubjectPrefix + ".>"),
// within ctx and at most DefaultCheckTimeout. It returns nil when one
// stream's subjects cover them all; otherwise an error that says what
// is wrong: NATS unreachable or without JetStream, no stream capturing
// the subjects at all (every message would fail with "no responders"
// and be dead-lettered), or streams capturing only some topics.
func CheckCapture(ctx context.Context, cfg Config) error {
	ctx, cancel := context.WithTimeout(ctx, DefaultCheckTimeout)
	defer cancel()
	cfg.ConnectTimeout = cmp.Or(cfg.ConnectTimeout, DefaultCheckTimeout)
	d, err := New(ctx, cfg)
	if err != nil {
		return err
	}
	defer d.Close()
	want := cfg.SubjectPrefix + ".>"
	streams := d.js.ListStreams(ctx, natsjs.WithStreamListSubject(want))
	var partial []string
	for info := range streams.Info() {
		for _, filter := range info.Config.Subjects {
			if SubjectCovers(filter, want) {
				return nil
			}
		}
		partial = append(partial, fmt.Sprintf("%s (%s)", info.Config.Name, strings.Join(info.Config.Subjects, ", ")))
	}
	if err := streams.Err(); err != nil {
		return fmt.Errorf("jetstream: list the streams of %s: %w", want, err)
	}
	if len(partial) == 0 {
		return fmt.Errorf("no stream captures %s: every message would be refused and dead-lettered; create a stream with the subject %s", want, want)
	}
	slices.Sort(partial)
	return fmt.Errorf("no stream captures all of %s, only some topics: %s", want, strings.Join(partial, "; "))
}

// SubjectCovers reports whether the subject filter matches every subject
// that subject (which may hold wildcards) matches: "orders.>" covers
// "orders.created" and "orders.>", "orders.*" covers "orders.created" but
// not "orders.>".
func SubjectCovers(filter, subject string) bool {
	f, s := strings.Split(filter, "."), strings.Split(subject, ".")
	for i, tok := range f {
		if tok == ">" {
			return len(s) > i
		}
		if i >= len(s) {
			return false
		}
		switch {
		case tok == "*":
			if s[i] == ">" {
				return false
			}
		case tok != s[i]:
			return false
		}
	}
	return len(f) == len(s)
}

// CheckPrefix reports what is wrong with prefix as a destination's
// subject prefix (empty tokens, whitespace, wildcards), nil if nothing
// is: New's own check, for the configuration page.
func CheckPrefix(prefix string) error { return checkSubject(prefix) }
