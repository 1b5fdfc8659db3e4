package console

import (
	"context"
	"errors"
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
	lists, err := h.settingsLists(c.Request().Context())
	if err != nil {
		return err
	}
	lists.Notice = deletedNotice(c.QueryParam("deleted"), c.QueryParam("name"))
	return render(c, http.StatusOK, templates.SettingsPage(h.page("Configuration", ""), lists))
}

// settingsLive serves GET /settings/live: the page's lists, re-read when
// the configuration changes (a "config" change on the stream).
func (h *Handler) settingsLive(c echo.Context) error {
	lists, err := h.settingsLists(c.Request().Context())
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return render(c, http.StatusOK, templates.SettingsListsRegion(lists))
}

// settingsLists reads both lists: three small reads of tables of a few
// rows each.
func (h *Handler) settingsLists(ctx context.Context) (templates.SettingsLists, error) {
	q := queries.New(h.deps.DB)
	dests, err := q.DestinationList(ctx)
	if err != nil {
		return templates.SettingsLists{}, fmt.Errorf("list destinations: %w", err)
	}
	sources, err := q.InboxSourceList(ctx)
	if err != nil {
		return templates.SettingsLists{}, fmt.Errorf("list inbox sources: %w", err)
	}
	checks, err := q.DestinationCheckList(ctx)
	if err != nil {
		return templates.SettingsLists{}, fmt.Errorf("list destination checks: %w", err)
	}
	failed := map[string]string{}
	for _, ch := range checks {
		failed[ch.Destination] = ch.Problem
	}
	lists := templates.SettingsLists{
		Dests:   make([]templates.DestinationSetting, len(dests)),
		Sources: make([]templates.SourceSetting, len(sources)),
	}
	for i, d := range dests {
		lists.Dests[i] = h.destinationSetting(d)
		if p := failed[d.Name]; p != "" && lists.Dests[i].Problem == "" && d.Kind == "jetstream" {
			lists.Dests[i].Problem = p
		}
	}
	for i, s := range sources {
		lists.Sources[i] = h.sourceSetting(s)
	}
	return lists, nil
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
		Name: d.Name, Kind: d.Kind, Address: d.Address, Disabled: d.Disabled, EditURL: destinationURL(d.Name),
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
		MaxAttempts: strconv.Itoa(int(s.MaxAttempts)), Disabled: s.Disabled, EditURL: sourceURL(s.Name),
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
	if problem := inbox.SourceFromRow(s, h.getenv).Problem; problem != nil && !errors.Is(problem, inbox.ErrDisabled) {
		v.Problem = problem.Error()
	}
	return v
}
