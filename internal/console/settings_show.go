package console

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/destination/registry"
	"github.com/switchyard/switchyard/internal/destination/webhook"
	"github.com/switchyard/switchyard/internal/inbox"
	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/web/templates"
)

// settingsShow is the configuration page (admins): every destination and
// inbox source with what is wrong with it, checked the way the dispatcher
// and the receiver set them up, and whether each secret reference
// resolves in this process's environment. Secrets are never shown.
func (h *Handler) settingsShow(c echo.Context) error {
	ctx := c.Request().Context()
	q := queries.New(h.deps.DB)
	dests, err := q.DestinationList(ctx)
	if err != nil {
		return fmt.Errorf("list destinations: %w", err)
	}
	sources, err := q.InboxSourceList(ctx)
	if err != nil {
		return fmt.Errorf("list inbox sources: %w", err)
	}
	dv := make([]templates.DestinationSetting, len(dests))
	for i, d := range dests {
		dv[i] = h.destinationSetting(d)
	}
	sv := make([]templates.SourceSetting, len(sources))
	for i, s := range sources {
		sv[i] = h.sourceSetting(s)
	}
	return render(c, http.StatusOK, templates.SettingsPage(h.page("Configuration", ""), dv, sv))
}

// getenv reads a secret reference; nil Deps.Getenv resolves nothing.
func (h *Handler) getenv(name string) string {
	if h.deps.Getenv == nil {
		return ""
	}
	return h.deps.Getenv(name)
}

func (h *Handler) secretRefs(refs []string) []templates.SecretRef {
	out := make([]templates.SecretRef, 0, len(refs))
	for _, r := range refs {
		if r != "" {
			out = append(out, templates.SecretRef{Name: r, Resolves: h.getenv(r) != ""})
		}
	}
	return out
}

func (h *Handler) destinationSetting(d queries.SwitchyardDestination) templates.DestinationSetting {
	v := templates.DestinationSetting{
		Name: d.Name, Kind: d.Kind, Address: d.Address,
		Secrets:     h.secretRefs(append([]string{d.SecretRef}, d.SecretRefs...)),
		Permanent:   "4xx but 401, 403, 404, 408, 429 (default)",
		Concurrency: strconv.Itoa(int(d.Concurrency)),
		Rate:        "unlimited",
		Retry:       fmt.Sprintf("%d attempts, %d ms to %d ms", d.MaxAttempts, d.RetryBaseMs, d.RetryCapMs),
		Breaker:     fmt.Sprintf("opens at %.0f%% of %d, for %d ms", d.BreakerFailureRatio*100, d.BreakerMinRequests, d.BreakerOpenMs),
	}
	if d.RatePerSecond > 0 {
		v.Rate = fmt.Sprintf("%g/s, burst %d", d.RatePerSecond, d.Burst)
	}
	if statuses := registry.PermanentStatuses(d); statuses != nil {
		v.Permanent = "none"
		if len(statuses) > 0 {
			texts := make([]string, len(statuses))
			for i, s := range statuses {
				texts[i] = strconv.Itoa(s)
			}
			v.Permanent = strings.Join(texts, ", ")
		}
	}
	if d.Kind == "webhook" {
		secrets, err := registry.Secrets(d, h.getenv)
		if err == nil {
			_, err = webhook.New(webhook.Config{URL: d.Address, Secrets: secrets, PermanentStatuses: registry.PermanentStatuses(d)})
		}
		if err != nil {
			v.Problem = err.Error()
		}
	}
	return v
}

func (h *Handler) sourceSetting(s queries.SwitchyardInboxSource) templates.SourceSetting {
	v := templates.SourceSetting{
		Name: s.Name, Scheme: s.Scheme, Handler: s.Handler, Secrets: h.secretRefs(s.SecretRefs),
		Tolerance: fmt.Sprintf("%d s", s.ToleranceSeconds), OutOfOrder: s.OutOfOrder,
		MaxAttempts: strconv.Itoa(int(s.MaxAttempts)),
	}
	switch s.Handler {
	case inbox.HandlerForward:
		v.HandlerDetail = "to destination " + s.ForwardTo
		if s.EntityField != "" {
			v.HandlerDetail += ", ordered by " + s.EntityField
		}
	case inbox.HandlerSQL:
		v.HandlerDetail = "calls " + s.SqlFunction + "(event, headers)"
	}
	if problem := inbox.SourceFromRow(s, h.getenv).Problem; problem != nil {
		v.Problem = problem.Error()
	}
	return v
}
