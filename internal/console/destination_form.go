package console

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/action"
	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/web/templates"
)

// destinationFields are the destination form's fields (action.DestinationInput).
var destinationFields = []string{"name", "kind", "address", "secret_refs", "concurrency", "rate_per_second", "burst",
	"timeout_ms", "breaker_failure_percent", "breaker_min_requests", "breaker_open_ms", "retry_base_ms",
	"retry_cap_ms", "max_attempts", "permanent", "permanent_statuses"}

// destinationNew serves GET /settings/destinations/new: the form with the
// table's defaults.
func (h *Handler) destinationNew(c echo.Context) error {
	f := destinationState(queries.SwitchyardDestination{
		Kind: "webhook", RetryBaseMs: 1000, RetryCapMs: 600000, MaxAttempts: 12, TimeoutMs: 10000, Burst: 1,
		Concurrency: 16, BreakerFailureRatio: 0.5, BreakerMinRequests: 10, BreakerOpenMs: 30000,
	})
	return render(c, http.StatusOK, templates.DestinationFormPage(h.page("New destination", ""),
		templates.DestinationForm{Create: true, Action: "/settings/destinations", Form: f}))
}

// destinationEdit serves GET /settings/destinations/:name: the form with
// the saved row, which secret references resolve here, and the last check
// of its stream.
func (h *Handler) destinationEdit(c echo.Context) error {
	row, f, err := h.destinationFormState(c, c.Param("name"))
	if err != nil {
		return err
	}
	return h.renderDestinationForm(c, http.StatusOK, row.Name, f)
}

// destinationFormState is the edit form of destination name as saved,
// with the notice of the save or rename that led here.
func (h *Handler) destinationFormState(c echo.Context, name string) (queries.SwitchyardDestination, templates.FormState, error) {
	row, err := queries.New(h.deps.DB).DestinationGet(c.Request().Context(), name)
	if errors.Is(err, pgx.ErrNoRows) {
		return row, templates.FormState{}, errNoSetting("destination")
	}
	if err != nil {
		return row, templates.FormState{}, fmt.Errorf("read destination: %w", err)
	}
	f := destinationState(row)
	switch {
	case c.QueryParam("saved") != "":
		f.Notice = "Saved. Every dispatcher uses it within 10 s."
	case namePattern.MatchString(c.QueryParam("renamed")):
		f.Notice = "Renamed from " + c.QueryParam("renamed") + ". Every dispatcher uses the new name within 10 s."
	}
	return row, f, nil
}

// renderDestinationForm renders the edit form of destination name with f.
func (h *Handler) renderDestinationForm(c echo.Context, status int, name string, f templates.FormState) error {
	return h.renderDestinationFormWith(c, status, name, f, destinationRemove(name, "", nil))
}

// renderDestinationFormWith is renderDestinationForm with the rename and
// delete panel as given.
func (h *Handler) renderDestinationFormWith(c echo.Context, status int, name string, f templates.FormState, remove templates.RemoveForm) error {
	ctx := c.Request().Context()
	q := queries.New(h.deps.DB)
	d := templates.DestinationForm{Action: destinationURL(name), Form: f, TestURL: destinationURL(name) + "/test"}
	row, err := q.DestinationGet(ctx, name)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return render(c, status, templates.DestinationFormPage(h.page("Destination "+name, ""), d))
	case err != nil:
		return fmt.Errorf("read destination: %w", err)
	}
	setting := h.destinationSetting(row)
	d.Secrets, d.Problem, d.Remove = setting.Secrets, setting.Problem, remove
	checks, err := q.DestinationCheckList(ctx)
	if err != nil {
		return fmt.Errorf("read destination checks: %w", err)
	}
	for _, ch := range checks {
		if ch.Destination == name && ch.Problem != "" && row.Kind == action.KindJetStream {
			d.Check, d.CheckedAt = ch.Problem, ch.CheckedAt.UTC().Format("15:04:05 UTC")
		}
	}
	return render(c, status, templates.DestinationFormPage(h.page("Destination "+name, ""), d))
}

// destinationCreate serves POST /settings/destinations.
func (h *Handler) destinationCreate(c echo.Context) error {
	f := formValues(c, destinationFields, []string{"enabled"})
	saved, err := h.actions.DestinationSave(c.Request().Context(), h.deps.DB, actor(c), destinationInput(f, true))
	if err != nil {
		status, err := refusedForm(&f, err)
		if err != nil {
			return err
		}
		return render(c, status, templates.DestinationFormPage(h.page("New destination", ""),
			templates.DestinationForm{Create: true, Action: "/settings/destinations", Form: f}))
	}
	return c.Redirect(http.StatusSeeOther, destinationURL(saved.Row.Name)+"?saved=1")
}

// destinationUpdate serves POST /settings/destinations/:name.
func (h *Handler) destinationUpdate(c echo.Context) error {
	f := formValues(c, destinationFields, []string{"enabled"})
	f.Values["name"] = c.Param("name") // the path names the destination; the form cannot rename it
	saved, err := h.actions.DestinationSave(c.Request().Context(), h.deps.DB, actor(c), destinationInput(f, false))
	if err != nil {
		status, err := refusedForm(&f, err)
		if err != nil {
			return err
		}
		return h.renderDestinationForm(c, status, c.Param("name"), f)
	}
	return c.Redirect(http.StatusSeeOther, destinationURL(saved.Row.Name)+"?saved=1")
}

// destinationInput is the action's input from the form.
func destinationInput(f templates.FormState, create bool) action.DestinationInput {
	v := f.Values
	return action.DestinationInput{
		Create: create, Name: v["name"], Kind: v["kind"], Address: v["address"], SecretRefs: v["secret_refs"],
		Concurrency: v["concurrency"], RatePerSecond: v["rate_per_second"], Burst: v["burst"], TimeoutMs: v["timeout_ms"],
		BreakerFailurePercent: v["breaker_failure_percent"], BreakerMinRequests: v["breaker_min_requests"],
		BreakerOpenMs: v["breaker_open_ms"], RetryBaseMs: v["retry_base_ms"], RetryCapMs: v["retry_cap_ms"],
		MaxAttempts: v["max_attempts"], Permanent: v["permanent"], PermanentStatuses: v["permanent_statuses"],
		Enabled: f.Checked["enabled"],
	}
}

// destinationState is the form of a saved row.
func destinationState(r queries.SwitchyardDestination) templates.FormState {
	itoa := func(n int32) string { return strconv.Itoa(int(n)) }
	refs := r.SecretRefs
	if r.SecretRef != "" {
		refs = append([]string{r.SecretRef}, refs...)
	}
	f := templates.FormState{Values: map[string]string{
		"name": r.Name, "kind": r.Kind, "address": r.Address, "secret_refs": strings.Join(refs, "\n"),
		"concurrency": itoa(r.Concurrency), "rate_per_second": strconv.FormatFloat(r.RatePerSecond, 'g', -1, 64),
		"burst": itoa(r.Burst), "timeout_ms": itoa(r.TimeoutMs),
		"breaker_failure_percent": strconv.FormatFloat(r.BreakerFailureRatio*100, 'g', -1, 64),
		"breaker_min_requests":    itoa(r.BreakerMinRequests), "breaker_open_ms": itoa(r.BreakerOpenMs),
		"retry_base_ms": itoa(r.RetryBaseMs), "retry_cap_ms": itoa(r.RetryCapMs), "max_attempts": itoa(r.MaxAttempts),
		"permanent": action.PermanentDefault,
	}, Checked: map[string]bool{"enabled": !r.Disabled}}
	if r.PermanentStatuses != nil {
		texts := make([]string, len(r.PermanentStatuses))
		for i, s := range r.PermanentStatuses {
			texts[i] = strconv.Itoa(int(s))
		}
		f.Values["permanent"], f.Values["permanent_statuses"] = action.PermanentList, strings.Join(texts, ", ")
	}
	return f
}
