package httpserver

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
)

// FormMaxBody is the largest body a route takes unless Config.BodyLimit
// says otherwise: it fits every form of the console (a name, a password, a
// reason, a filter). Routes that take more (the JSON API, an edited
// payload, the inbox) say so through Config.BodyLimit.
const FormMaxBody = 16 << 10

// Timeouts is how long a client may take. The zero value of a field takes
// its default (DefaultTimeouts).
type Timeouts struct {
	// ReadHeader bounds reading a request's headers.
	ReadHeader time.Duration
	// Read bounds reading a whole request, body included, on every route
	// but the streaming ones.
	Read time.Duration
	// Write bounds writing a response, from the end of the request's
	// headers, on every route but the streaming ones (which set a
	// deadline on each write of their own).
	Write time.Duration
	// Idle bounds how long a kept-alive connection waits for its next
	// request.
	Idle time.Duration
}

// DefaultTimeouts are the timeouts of a zero Timeouts.
var DefaultTimeouts = Timeouts{ReadHeader: 10 * time.Second, Read: 30 * time.Second, Write: 60 * time.Second, Idle: 2 * time.Minute}

func (t Timeouts) withDefaults() Timeouts {
	pick := func(v, def time.Duration) time.Duration {
		if v <= 0 {
			return def
		}
		return v
	}
	return Timeouts{
		ReadHeader: pick(t.ReadHeader, DefaultTimeouts.ReadHeader), Read: pick(t.Read, DefaultTimeouts.Read),
		Write: pick(t.Write, DefaultTimeouts.Write), Idle: pick(t.Idle, DefaultTimeouts.Idle),
	}
}

// guardBody applies a route's body limit (limit, after routing; nil or 0:
// FormMaxBody) and refuses multipart/form-data with 415: nothing in the
// console uploads, and a multipart form larger than echo's 32 MiB memory
// budget is spooled to temporary files.
//
// It also removes whatever multipart form a request parsed once the
// request ends: net/http removes only the temporary files of the request
// it handed to the server, and middleware here replaces the request with
// copies (req.WithContext) on which a form would be parsed and forgotten.
//
// Streaming routes (streaming) keep no server deadline: the server's read
// and write deadlines, set before any handler runs, are lifted for them;
// they bound each write themselves.
func guardBody(limit func(c echo.Context) int64, streaming func(c echo.Context) bool) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			defer removeMultipart(c)
			req := c.Request()
			if streaming != nil && streaming(c) {
				liftDeadlines(c)
			}
			if isMultipart(req) {
				return echo.NewHTTPError(http.StatusUnsupportedMediaType, "This console takes no uploads: send the form as application/x-www-form-urlencoded or JSON.")
			}
			max := int64(FormMaxBody)
			if limit != nil {
				if l := limit(c); l > 0 {
					max = l
				}
			}
			if req.ContentLength > max {
				return echo.NewHTTPError(http.StatusRequestEntityTooLarge, fmt.Sprintf("The request body is larger than the %d bytes this address takes.", max))
			}
			if req.Body != nil && req.Body != http.NoBody {
				req.Body = http.MaxBytesReader(c.Response(), req.Body, max)
			}
			err := next(c)
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				return echo.NewHTTPError(http.StatusRequestEntityTooLarge, fmt.Sprintf("The request body is larger than the %d bytes this address takes.", max))
			}
			return err
		}
	}
}

// liftDeadlines lifts the server's read and write deadlines from c's
// connection. A read deadline left in place would also cancel the
// request's context when it passes (net/http's background read fails).
func liftDeadlines(c echo.Context) {
	rc := http.NewResponseController(c.Response())
	// Not supported by test recorders, which have no deadline.
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
}

func isMultipart(req *http.Request) bool {
	ct := req.Header.Get(echo.HeaderContentType)
	media, _, err := mime.ParseMediaType(ct)
	if err != nil {
		// An unparsable type that names multipart must not slip past.
		media = strings.ToLower(strings.TrimSpace(ct))
	}
	return strings.HasPrefix(media, "multipart/")
}

// removeMultipart removes the temporary files of a multipart form parsed
// on the request c ends with (a copy of the server's, possibly).
func removeMultipart(c echo.Context) {
	if f := c.Request().MultipartForm; f != nil {
		_ = f.RemoveAll()
	}
}
