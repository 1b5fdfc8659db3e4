package webhook

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/switchyard/switchyard/internal/destination"
	"github.com/switchyard/switchyard/internal/pgtext"
)

const (
	// maxDrainBytes bounds how much of a response body beyond
	// MaxResponseBytes is read and discarded so that the connection can be
	// reused; a longer body costs its connection instead.
	maxDrainBytes = 64 << 10
	// maxSnippetBytes bounds the part of a response body quoted in an
	// error text.
	maxSnippetBytes = 256
)

var _ destination.Destination = (*Destination)(nil)

// Deliver POSTs the payload, signed, with Content-Type application/json,
// the static headers, the message's headers and the webhook-* headers
// (which, like Content-Type, nothing overrides). It waits at most the
// configured Timeout, and returns:
//   - nil for a 2xx;
//   - a permanent error for a 3xx (redirects are never followed), and for
//     a status the destination's policy calls permanent (Config.PermanentStatuses;
//     by default destination.PermanentStatus: a 4xx other than 401, 403,
//     404, 408 and 429), quoting the first bytes of the body:
//     "POST <url>: HTTP 400: <body>";
//   - a retryable error for any other status, a transport error, or the
//     timeout ("POST <url>: timeout after 10s: ...");
//   - a permanent error, without sending anything, for a payload that is
//     not valid JSON, an empty message id, or a malformed message header.
//
// Whenever a response arrived, Outcome holds its status and at most
// MaxResponseBytes of its body as valid UTF-8. Error texts never contain
// the URL's userinfo or query.
func (d *Destination) Deliver(ctx context.Context, m destination.Delivery) (destination.Outcome, error) {
	write, err := d.request(m)
	if err != nil {
		return destination.Outcome{}, destination.Permanent(fmt.Errorf("POST %s: %w", d.display, err))
	}
	attemptCtx, budget, cancel := d.attemptContext(ctx)
	defer cancel()
	a, err := d.pool.roundTrip(attemptCtx, write)
	if err != nil {
		return destination.Outcome{}, d.transportError(ctx, budget, err)
	}
	out := destination.Outcome{StatusCode: a.status, Response: responseText(a.body)}
	return out, d.statusError(out, a.location)
}

// request checks m and returns what writes its signed request on the
// wire, or says why m cannot be sent.
func (d *Destination) request(m destination.Delivery) (func(*bufio.Writer) error, error) {
	if !json.Valid(m.Payload) {
		return nil, errors.New("invalid payload: not valid JSON")
	}
	if err := checkHeader(HeaderID, m.MessageID); err != nil || m.MessageID == "" {
		return nil, fmt.Errorf("invalid message id %q", m.MessageID)
	}
	fields := d.fields
	if len(m.Headers) > 0 {
		own := make([]field, 0, len(m.Headers))
		for name, value := range m.Headers {
			if err := checkHeader(name, value); err != nil {
				return nil, fmt.Errorf("message header: %w", err)
			}
			if name = textproto.CanonicalMIMEHeaderKey(name); !reserved[name] {
				own = append(own, field{name, value})
			}
		}
		fields = merge(d.fields, own)
	}
	unix := d.now().Unix()
	signature := d.signature(m.MessageID, unix, m.Payload)
	return func(w *bufio.Writer) error {
		w.WriteString(d.requestLine)
		for _, f := range fields {
			writeField(w, f.name, f.value)
		}
		var digits [20]byte
		writeField(w, "Content-Type", "application/json")
		writeField(w, "Content-Length", string(strconv.AppendInt(digits[:0], int64(len(m.Payload)), 10)))
		writeField(w, canonicalID, m.MessageID)
		writeField(w, canonicalTimestamp, string(strconv.AppendInt(digits[:0], unix, 10)))
		writeField(w, canonicalSignature, signature)
		w.WriteString("\r\n")
		_, err := w.Write(m.Payload)
		return err
	}, nil
}

// signature is the webhook-signature header's value: one entry per key.
func (d *Destination) signature(id string, unix int64, body []byte) string {
	if len(d.signers) == 1 {
		return d.signers[0].entry(id, unix, body)
	}
	sigs := make([]string, len(d.signers))
	for i, s := range d.signers {
		sigs[i] = s.entry(id, unix, body)
	}
	return strings.Join(sigs, " ")
}

// field is one header of a request, its name canonical.
type field struct{ name, value string }

// reserved are the headers that neither the static headers nor a
// message's own set: the request's framing and the signature's.
var reserved = map[string]bool{
	"Host": true, "Content-Length": true, "Content-Type": true, "Transfer-Encoding": true, "Trailer": true,
	canonicalID: true, canonicalTimestamp: true, canonicalSignature: true,
}

// merge returns base's fields that own does not name, then own's, each
// part sorted by name.
func merge(base, own []field) []field {
	slices.SortFunc(own, func(a, b field) int { return strings.Compare(a.name, b.name) })
	merged := make([]field, 0, len(base)+len(own))
	for _, f := range base {
		if !slices.ContainsFunc(own, func(o field) bool { return o.name == f.name }) {
			merged = append(merged, f)
		}
	}
	return append(merged, own...)
}

// writeField writes one header line; checkHeader has ruled out line
// breaks in names and values.
func writeField(w *bufio.Writer, name, value string) {
	w.WriteString(name)
	w.WriteString(": ")
	w.WriteString(value)
	w.WriteString("\r\n")
}

// attemptContext bounds one delivery by the Timeout, unless ctx ends
// sooner already: the dispatcher gives every attempt its destination's
// timeout, the same, and a second timer would only cost. budget is the
// time the attempt has.
func (d *Destination) attemptContext(ctx context.Context) (_ context.Context, budget time.Duration, cancel context.CancelFunc) {
	if deadline, ok := ctx.Deadline(); ok {
		if left := time.Until(deadline); left <= d.timeout {
			return ctx, max(left, 0), func() {}
		}
	}
	ctx, cancel = context.WithTimeout(ctx, d.timeout)
	return ctx, d.timeout, cancel
}

// transportError explains a failed round trip; all are retryable. parent
// is the caller's context, to tell its cancellation from the attempt's
// deadline (its own, or the caller's when that came sooner); budget is
// the time the attempt had.
func (d *Destination) transportError(parent context.Context, budget time.Duration, err error) error {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("POST %s: timeout after %s: %w", d.display, budget.Round(time.Millisecond), err)
	case parent.Err() != nil:
		return fmt.Errorf("POST %s: %w", d.display, parent.Err())
	default:
		return fmt.Errorf("POST %s: %w", d.display, err)
	}
}

// statusError classifies a response by its status; see Deliver.
func (d *Destination) statusError(out destination.Outcome, location string) error {
	code := out.StatusCode
	switch {
	case code >= 200 && code < 300:
		return nil
	case code >= 300 && code < 400:
		return destination.Permanent(fmt.Errorf(
			"POST %s: HTTP %d: redirect to %q not followed (redirects never are; configure the final URL)",
			d.display, code, truncate(location, maxSnippetBytes)))
	}
	err := fmt.Errorf("POST %s: HTTP %d: %s", d.display, code, snippet(out.Response, code))
	if d.permanent(code) {
		return destination.Permanent(err)
	}
	return err
}

// bodyBudget is the most of a response body exchange lets readBody read
// from the connection: what it keeps and what it drains, and the framing
// of a chunked body around them. A larger body ends the read early and
// costs its connection; the status is what counts.
const bodyBudget = 2 * (destination.MaxResponseBytes + maxDrainBytes)

// readBody keeps the first MaxResponseBytes of body and drains a bounded
// remainder so that the connection can be reused; complete says it read
// body to its end. A body cut short by an error keeps what was read.
func readBody(body io.Reader) (head []byte, complete bool) {
	if body == http.NoBody { // a 204, say: nothing to read
		return nil, true
	}
	head, err := io.ReadAll(io.LimitReader(body, destination.MaxResponseBytes))
	if err != nil {
		return head, false
	}
	n, err := io.Copy(io.Discard, io.LimitReader(body, maxDrainBytes+1))
	return head, err == nil && n <= maxDrainBytes
}

// responseText makes a body prefix safe to store and show: valid UTF-8
// without NUL (PostgreSQL text accepts neither) and at most
// MaxResponseBytes long. A rune cut off by the byte limit is dropped.
func responseText(b []byte) string {
	b = trimPartialRune(b)
	return pgtext.Clean(string(b), destination.MaxResponseBytes)
}

// trimPartialRune drops an incomplete UTF-8 sequence at the end of b.
func trimPartialRune(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			break
		}
	}
	return b
}

// snippet quotes the start of a response body on one line, or names the
// status when the body is empty.
func snippet(body string, code int) string {
	s := strings.Join(strings.Fields(body), " ")
	if s == "" {
		return cmp.Or(http.StatusText(code), "(empty body)")
	}
	return truncate(s, maxSnippetBytes)
}

// truncate cuts s to at most n bytes, on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// checkHeader rejects what net/http would refuse to send or would send
// mangled: a name that is not an RFC 9110 token, a value with control
// characters other than tab.
func checkHeader(name, value string) error {
	if name == "" || strings.IndexFunc(name, func(r rune) bool { return !isTokenChar(r) }) >= 0 {
		return fmt.Errorf("invalid header name %q", name)
	}
	if strings.IndexFunc(value, func(r rune) bool { return r == 0x7f || (r < 0x20 && r != '\t') }) >= 0 {
		return fmt.Errorf("header %s: invalid value %q", name, value)
	}
	return nil
}

// isTokenChar reports whether r may appear in an RFC 9110 token.
func isTokenChar(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return true
	default:
		return strings.ContainsRune("!#$%&'*+-.^_`|~", r)
	}
}
