package console

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/web/templates"
)

// newCountCap is the most ConsoleMessagesCountNew counts, and
// newCountHorizon how many ids above the first row it looks at: a page
// left open for a day must not make each check walk a day of messages.
const (
	newCountCap     = 100
	newCountHorizon = 20000
)

// messagesNewCount serves GET /messages/new?above=ID&<filters>: the "N new"
// control, how many matching messages arrived above the first row shown
// (for the delivered list, in delivery order: delivered after it).
// The list itself never moves; the control's link shows them.
func (h *Handler) messagesNewCount(c echo.Context) error {
	ctx := c.Request().Context()
	q := queries.New(h.deps.DB)
	f, err := parseMessageFilter(ctx, q, c.QueryParams())
	if err != nil {
		return err
	}
	above, err := strconv.ParseInt(c.QueryParam("above"), 10, 64)
	if err != nil || above < 0 {
		return echo.NewHTTPError(http.StatusBadRequest, "above must be a message id.")
	}
	p := f.params
	var n int64
	if choosePath(p) == pathDelivered {
		// In delivery order: the deliveries after the first row's.
		n, err = q.ConsoleMessagesCountNewDelivered(ctx, above)
	} else {
		n, err = q.ConsoleMessagesCountNew(ctx, queries.ConsoleMessagesCountNewParams{
			State: p.State, Topic: p.Topic, TopicPrefix: p.TopicPrefix, TopicUpper: p.TopicUpper,
			Destination: p.Destination, DestinationPrefix: p.DestinationPrefix, DestinationUpper: p.DestinationUpper,
			AggregateType: p.AggregateType, AggregateID: p.AggregateID, ErrorText: p.ErrorText,
			CreatedFrom: p.CreatedFrom, CreatedTo: p.CreatedTo, Stage: p.Stage, LeaseOwnerPattern: p.LeaseOwnerPattern, Floor: p.Floor, Ceiling: min(p.Ceiling, above+newCountHorizon), Cursor: above,
		})
	}
	if err != nil {
		return fmt.Errorf("count new messages: %w", err)
	}
	return render(c, http.StatusOK, templates.NewMessagesControl(templates.NewMessages{
		Count: n, More: n >= newCountCap, FirstURL: "/messages" + f.query(),
	}))
}
