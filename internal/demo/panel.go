package demo

import (
	"net/url"
	"strconv"

	"github.com/a-h/templ"

	"github.com/switchyard/switchyard/web/templates"
)

// Panel is the console's page at /demo for one running demo: it shows the
// settings and applies changes to them (console.DemoPanel). It is safe for
// concurrent use.
type Panel struct {
	control *control
	mirror  *mirror
}

// Panel returns the demo's panel.
func (d *Demo) Panel() *Panel { return &Panel{control: d.control, mirror: d.mirror} }

// Render is the panel inside page, its form carrying csrfToken (for
// browsers that send no Sec-Fetch-Site); saved: a change was just applied.
func (p *Panel) Render(page templates.Page, csrfToken string, saved bool) templ.Component {
	s := p.control.settings()
	return panelPage(page, panelView{
		OrdersPerSecond: strconv.FormatFloat(s.OrdersPerSecond, 'f', -1, 64),
		InboxPerSecond:  strconv.FormatFloat(s.InboxPerSecond, 'f', -1, 64),
		FailurePercent:  strconv.Itoa(s.FailurePercent),
		LatencyMs:       strconv.Itoa(s.LatencyMs),
		Outage:          s.Outage,
		ProviderDown:    s.ProviderDown,
		Saved:           saved,
		CSRFToken:       csrfToken,
	})
}

// maxDrift bounds each drift knob: enough to see, few enough to read.
const maxDrift = 1000

// Apply applies the panel's submitted form and returns "", or refuses it
// with a sentence to show the operator, and changes nothing. A form with
// form=drift injects drift into the external system (drop, alter, add
// entities; lose deliveries) and takes it down or up; any other changes
// the traffic and the flaky destination.
func (p *Panel) Apply(form url.Values) (refusal string) {
	if form.Get("form") == "drift" {
		return p.applyDrift(form)
	}
	orders, err1 := strconv.ParseFloat(form.Get("orders_per_second"), 64)
	inbox, err2 := strconv.ParseFloat(form.Get("inbox_per_second"), 64)
	failure, err3 := strconv.Atoi(form.Get("failure_percent"))
	latency, err4 := strconv.Atoi(form.Get("latency_ms"))
	switch {
	case err1 != nil || orders < 0 || orders > 2000:
		return "Orders per second: a number from 0 to 2000."
	case err2 != nil || inbox < 0 || inbox > 200:
		return "Webhooks per second: a number from 0 to 200."
	case err3 != nil || failure < 0 || failure > 100:
		return "Failure rate: a whole percentage from 0 to 100."
	case err4 != nil || latency < 0 || latency > 30000:
		return "Latency: milliseconds from 0 to 30000."
	}
	s := p.control.settings()
	s.OrdersPerSecond, s.InboxPerSecond, s.FailurePercent, s.LatencyMs = orders, inbox, failure, latency
	s.Outage = form.Get("outage") == "on"
	p.control.set(s)
	return ""
}

// applyDrift is Apply of the drift form.
func (p *Panel) applyDrift(form url.Values) string {
	var d Drift
	for _, f := range []struct {
		name string
		n    *int
	}{{"drop", &d.Drop}, {"alter", &d.Alter}, {"add", &d.Add}, {"lose_deliveries", &d.LoseDeliveries}} {
		v := form.Get(f.name)
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > maxDrift {
			return "Drift: whole numbers of entities from 0 to " + strconv.Itoa(maxDrift) + "."
		}
		*f.n = n
	}
	p.mirror.inject(d)
	s := p.control.settings()
	s.ProviderDown = form.Get("provider_down") == "on"
	p.control.set(s)
	p.mirror.setDown(s.ProviderDown)
	return ""
}
