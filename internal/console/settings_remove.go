package console

import (
	"net/http"
	"net/url"
	"regexp"

	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/action"
	"github.com/switchyard/switchyard/web/templates"
)

// Renames and deletes of destinations and inbox sources, from the panel
// under their edit forms (action.DestinationRename and the others say
// what each does to what names the row). Plain form posts, like the
// saves: a rename redirects to the new name's page, a delete to the list
// with a notice; a refusal answers the edit page again, 404, 409 or 422,
// with the reason in the panel.

const (
	destinationRenameText = "Only a destination that no message names yet can be renamed (a typo fixed before the first message): services enqueue by name, and every message keeps the destination it was enqueued to. Forward sources naming it follow the new name."
	destinationDeleteText = "Refused while it has pending messages (they would be lost) or dead ones (a replay needs it), or while a source forwards to it. Its delivered and discarded messages, history only, are deleted with it. Services still enqueueing to it get an unknown destination error."
	sourceRenameText      = "Only a source that has recorded no event yet can be renamed: the event ids it took are its dedupe record. Its senders must then post to the new URL."
	sourceDeleteText      = "Refused while any of its events waits for an operator (failed, parked or held). Senders get 404 from then on (every instance within 10 s); its processed events are kept until retention, so a source made again under this name applies none of them twice."
)

// destinationRemove is the panel of destination name, with a refusal (nil:
// none) and the new name as typed.
func destinationRemove(name, newName string, refused *action.Refusal) templates.RemoveForm {
	r := templates.RemoveForm{What: "destination", Name: name, NewName: newName,
		RenameURL: destinationURL(name) + "/rename", DeleteURL: destinationURL(name) + "/delete",
		Rename: destinationRenameText, Delete: destinationDeleteText}
	if refused != nil {
		r.Err, r.ErrField = refused.Message, refused.Field
	}
	return r
}

func sourceRemove(name, newName string, refused *action.Refusal) templates.RemoveForm {
	r := templates.RemoveForm{What: "inbox source", Name: name, NewName: newName,
		RenameURL: sourceURL(name) + "/rename", DeleteURL: sourceURL(name) + "/delete",
		Rename: sourceRenameText, Delete: sourceDeleteText}
	if refused != nil {
		r.Err, r.ErrField = refused.Message, refused.Field
	}
	return r
}

// removeRefused is the status of a refused rename or delete and the
// refusal to show; a forbidden or unavailable refusal and any other error
// come back as the error, for recordDenials and the error handler.
func removeRefused(err error) (int, *action.Refusal, error) {
	r := action.AsRefusal(err)
	if r == nil || r.Kind == action.KindForbidden || r.Kind == action.KindUnavailable {
		return 0, nil, err
	}
	switch r.Kind {
	case action.KindNotFound:
		return http.StatusNotFound, r, nil
	case action.KindConflict:
		return http.StatusConflict, r, nil
	}
	return http.StatusUnprocessableEntity, r, nil
}

// destinationRename serves POST /settings/destinations/:name/rename.
func (h *Handler) destinationRename(c echo.Context) error {
	name, newName := c.Param("name"), c.FormValue("new_name")
	err := h.actions.DestinationRename(c.Request().Context(), h.deps.DB, actor(c), action.RenameInput{Name: name, NewName: newName})
	if err != nil {
		return h.destinationRemoveRefused(c, name, newName, err)
	}
	return c.Redirect(http.StatusSeeOther, destinationURL(newName)+"?renamed="+url.QueryEscape(name))
}

// destinationDelete serves POST /settings/destinations/:name/delete.
func (h *Handler) destinationDelete(c echo.Context) error {
	name := c.Param("name")
	_, err := h.actions.DestinationDelete(c.Request().Context(), h.deps.DB, actor(c), action.DeleteInput{Name: name, Confirmed: c.FormValue("confirm") != ""})
	if err != nil {
		return h.destinationRemoveRefused(c, name, "", err)
	}
	return c.Redirect(http.StatusSeeOther, "/settings?"+url.Values{"deleted": {"destination"}, "name": {name}}.Encode())
}

func (h *Handler) destinationRemoveRefused(c echo.Context, name, newName string, err error) error {
	status, refused, err := removeRefused(err)
	if err != nil {
		return err
	}
	if refused.Kind == action.KindNotFound {
		return errNoSetting("destination")
	}
	row, f, err := h.destinationFormState(c, name)
	if err != nil {
		return err
	}
	return h.renderDestinationFormWith(c, status, row.Name, f, destinationRemove(name, newName, refused))
}

// sourceRename serves POST /settings/sources/:name/rename.
func (h *Handler) sourceRename(c echo.Context) error {
	name, newName := c.Param("name"), c.FormValue("new_name")
	err := h.actions.SourceRename(c.Request().Context(), h.deps.DB, actor(c), action.RenameInput{Name: name, NewName: newName})
	if err != nil {
		return h.sourceRemoveRefused(c, name, newName, err)
	}
	return c.Redirect(http.StatusSeeOther, sourceURL(newName)+"?renamed="+url.QueryEscape(name))
}

// sourceDelete serves POST /settings/sources/:name/delete.
func (h *Handler) sourceDelete(c echo.Context) error {
	name := c.Param("name")
	_, err := h.actions.SourceDelete(c.Request().Context(), h.deps.DB, actor(c), action.DeleteInput{Name: name, Confirmed: c.FormValue("confirm") != ""})
	if err != nil {
		return h.sourceRemoveRefused(c, name, "", err)
	}
	return c.Redirect(http.StatusSeeOther, "/settings?"+url.Values{"deleted": {"source"}, "name": {name}}.Encode())
}

func (h *Handler) sourceRemoveRefused(c echo.Context, name, newName string, err error) error {
	status, refused, err := removeRefused(err)
	if err != nil {
		return err
	}
	if refused.Kind == action.KindNotFound {
		return errNoSetting("inbox source")
	}
	f, err := h.sourceFormState(c, name)
	if err != nil {
		return err
	}
	return h.renderSourceFormWith(c, status, name, f, sourceRemove(name, newName, refused))
}

// namePattern is what a destination's or source's name may be (the
// tables' CHECK): only such a name is put into a notice.
var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)

// deletedNotice is the list's notice after a delete: only a kind and a
// name as the tables allow them, never other text from the URL.
func deletedNotice(kind, name string) string {
	if !namePattern.MatchString(name) {
		return ""
	}
	switch kind {
	case "destination":
		return "Destination " + name + " deleted. Every dispatcher drops it within 10 s."
	case "source":
		return "Inbox source " + name + " deleted. Every receiver drops it within 10 s."
	}
	return ""
}
