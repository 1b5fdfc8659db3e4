package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/action"
	"github.com/switchyard/switchyard/internal/inbox"
	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/web/templates"
)

// sourceFields are the source form's fields (action.SourceInput).
var sourceFields = []string{"name", "scheme", "secret_refs", "handler", "forward_to", "entity_field",
	"sql_function", "tolerance_seconds", "out_of_order", "max_attempts"}

// sourceNew serves GET /settings/sources/new: the form with the table's
// defaults and the forward handler.
func (h *Handler) sourceNew(c echo.Context) error {
	f := sourceState(queries.SwitchyardInboxSource{
		Scheme: inbox.SchemeStandardWebhooks, Handler: inbox.HandlerForward, ToleranceSeconds: 300,
		OutOfOrder: "apply", MaxAttempts: 5,
	})
	return h.renderSourceForm(c, http.StatusOK, "", f)
}

// sourceEdit serves GET /settings/sources/:name.
func (h *Handler) sourceEdit(c echo.Context) error {
	f, err := h.sourceFormState(c, c.Param("name"))
	if err != nil {
		return err
	}
	return h.renderSourceForm(c, http.StatusOK, c.Param("name"), f)
}

// sourceFormState is the edit form of source name as saved, with the
// notice of the save or rename that led here.
func (h *Handler) sourceFormState(c echo.Context, name string) (templates.FormState, error) {
	row, err := queries.New(h.deps.DB).InboxSourceGet(c.Request().Context(), name)
	if errors.Is(err, pgx.ErrNoRows) {
		return templates.FormState{}, errNoSetting("inbox source")
	}
	if err != nil {
		return templates.FormState{}, fmt.Errorf("read inbox source: %w", err)
	}
	f := sourceState(row)
	switch {
	case c.QueryParam("saved") != "":
		f.Notice = "Saved. Every receiver uses it within 10 s."
	case namePattern.MatchString(c.QueryParam("renamed")):
		f.Notice = "Renamed from " + c.QueryParam("renamed") + ". Its senders must post to /inbox/" + row.Name + " now."
	}
	return f, nil
}

// renderSourceForm renders the source form with f: a new source's when
// name is "", else source name's.
func (h *Handler) renderSourceForm(c echo.Context, status int, name string, f templates.FormState) error {
	var remove templates.RemoveForm
	if name != "" {
		remove = sourceRemove(name, "", nil)
	}
	return h.renderSourceFormWith(c, status, name, f, remove)
}

// renderSourceFormWith is renderSourceForm with the rename and delete
// panel as given.
func (h *Handler) renderSourceFormWith(c echo.Context, status int, name string, f templates.FormState, remove templates.RemoveForm) error {
	ctx := c.Request().Context()
	s := templates.SourceForm{Create: name == "", Action: "/settings/sources", Form: f,
		Handlers: append([]string{inbox.HandlerForward, inbox.HandlerSQL}, h.deps.InboxHandlers...)}
	var err error
	if s.Destinations, err = h.destinationNames(ctx); err != nil {
		return err
	}
	title := "New inbox source"
	if name != "" {
		title = "Inbox source " + name
		s.Action, s.TestURL, s.ReceiveURL = sourceURL(name), sourceURL(name)+"/test", "/inbox/"+name
		row, err := queries.New(h.deps.DB).InboxSourceGet(ctx, name)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return fmt.Errorf("read inbox source: %w", err)
		default:
			setting := h.sourceSetting(row)
			s.Secrets, s.Problem, s.Remove = setting.Secrets, setting.Problem, remove
		}
	}
	return render(c, status, templates.SourceFormPage(h.page(title, ""), s))
}

// destinationNames lists the destinations a forward source may name.
func (h *Handler) destinationNames(ctx context.Context) ([]string, error) {
	rows, err := queries.New(h.deps.DB).DestinationList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list destinations: %w", err)
	}
	names := make([]string, len(rows))
	for i, r := range rows {
		names[i] = r.Name
	}
	return slices.Clip(names), nil
}

// sourceCreate serves POST /settings/sources.
func (h *Handler) sourceCreate(c echo.Context) error {
	f := formValues(c, sourceFields, []string{"enabled"})
	saved, err := h.actions.SourceSave(c.Request().Context(), h.deps.DB, actor(c), sourceInput(f, true))
	if err != nil {
		status, err := refusedForm(&f, err)
		if err != nil {
			return err
		}
		return h.renderSourceForm(c, status, "", f)
	}
	return c.Redirect(http.StatusSeeOther, sourceURL(saved.Row.Name)+"?saved=1")
}

// sourceUpdate serves POST /settings/sources/:name.
func (h *Handler) sourceUpdate(c echo.Context) error {
	f := formValues(c, sourceFields, []string{"enabled"})
	f.Values["name"] = c.Param("name")
	saved, err := h.actions.SourceSave(c.Request().Context(), h.deps.DB, actor(c), sourceInput(f, false))
	if err != nil {
		status, err := refusedForm(&f, err)
		if err != nil {
			return err
		}
		return h.renderSourceForm(c, status, c.Param("name"), f)
	}
	return c.Redirect(http.StatusSeeOther, sourceURL(saved.Row.Name)+"?saved=1")
}

func sourceInput(f templates.FormState, create bool) action.SourceInput {
	v := f.Values
	return action.SourceInput{
		Create: create, Name: v["name"], Scheme: v["scheme"], SecretRefs: v["secret_refs"], Handler: v["handler"],
		ForwardTo: v["forward_to"], EntityField: v["entity_field"], SQLFunction: v["sql_function"],
		ToleranceSeconds: v["tolerance_seconds"], OutOfOrder: v["out_of_order"], MaxAttempts: v["max_attempts"],
		Enabled: f.Checked["enabled"],
	}
}

// sourceState is the form of a saved row.
func sourceState(r queries.SwitchyardInboxSource) templates.FormState {
	return templates.FormState{Values: map[string]string{
		"name": r.Name, "scheme": r.Scheme, "secret_refs": strings.Join(r.SecretRefs, "\n"), "handler": r.Handler,
		"forward_to": r.ForwardTo, "entity_field": r.EntityField, "sql_function": r.SqlFunction,
		"tolerance_seconds": strconv.Itoa(int(r.ToleranceSeconds)), "out_of_order": r.OutOfOrder,
		"max_attempts": strconv.Itoa(int(r.MaxAttempts)),
	}, Checked: map[string]bool{"enabled": !r.Disabled}}
}
