package reconcile

import "context"

// A cycle reads the next page of keys while the remote is asked about the
// current one and the batch is recorded: the local read and the remote
// call overlap instead of taking turns. At most one page is read ahead;
// the cursor of every batch is still persisted in order, so a crash or a
// lost lease loses nothing but the page read ahead.

// pageResult is a page read ahead, after the cursor after.
type pageResult struct {
	after *string
	items []Item
	err   error
}

// page returns the page after after: the one read ahead if it is that
// one, else read now.
func (r *cycleRun) page(ctx context.Context, after *string, upper string) ([]Item, error) {
	if r.ahead != nil {
		res := <-r.ahead
		r.ahead = nil
		if sameCursor(res.after, after) {
			return res.items, res.err
		}
	}
	return r.src.Page(ctx, *r.cycle.Since, after, upper, r.check.BatchSize)
}

// readAhead starts reading the page after after.
func (r *cycleRun) readAhead(ctx context.Context, after *string, upper string) {
	ch := make(chan pageResult, 1)
	r.ahead = ch
	since := *r.cycle.Since
	go func() {
		items, err := r.src.Page(ctx, since, after, upper, r.check.BatchSize)
		ch <- pageResult{after: after, items: items, err: err}
	}()
}

// dropAhead waits for a page read ahead that will not be used, so that
// no read outlives the cycle.
func (r *cycleRun) dropAhead() {
	if r.ahead != nil {
		<-r.ahead
		r.ahead = nil
	}
}

func sameCursor(a, b *string) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}
