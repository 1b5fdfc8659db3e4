// Package templates holds the console's templ components and the view models
// they render. Components receive everything they show through their
// arguments: no data access here, and no import of the query layer.
package templates

// Section identifies a top-level page, for the navigation's current marker.
type Section string

// The console's sections, in navigation order.
const (
	SectionDashboard      Section = "dashboard"
	SectionMessages       Section = "messages"
	SectionDeadLetters    Section = "dead-letters"
	SectionInbox          Section = "inbox"
	SectionTriage         Section = "triage"
	SectionReconciliation Section = "reconciliation"
	SectionAudit          Section = "audit"
	// SectionDemo is the panel of `console demo`, listed only while it
	// runs (Viewer.DemoPanel).
	SectionDemo Section = "demo"
)

// NavItem is one link of the navigation.
type NavItem struct {
	Section Section
	Label   string
	Href    string
}

// Navigation lists the sections in the order the navigation shows them.
func Navigation() []NavItem {
	return []NavItem{
		{SectionDashboard, "Dashboard", "/"},
		{SectionMessages, "Messages", "/messages"},
		{SectionDeadLetters, "Dead letters", "/dead-letters"},
		{SectionInbox, "Inbox", "/inbox"},
		{SectionTriage, "Triage", "/triage"},
		{SectionReconciliation, "Reconciliation", "/reconciliation"},
		{SectionAudit, "Audit", "/audit"},
		{SectionDemo, "Demo", "/demo"},
	}
}

// Assets resolves a static asset's logical name to its content-hash URL and
// its subresource-integrity digest.
type Assets interface {
	Path(name string) string
	Integrity(name string) string
}

// Page is what the layout needs to frame any page.
type Page struct {
	Title   string  // the page's own title; the layout appends "· Switchyard"
	Section Section // marks the current navigation item
	Assets  Assets
}

// EmptyState is a section with nothing to show yet.
type EmptyState struct {
	Heading string
	Text    string
}
