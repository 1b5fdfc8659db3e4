package templates

// SecretRef is one environment variable a destination or source names for
// a secret: the page shows whether it resolves, never its value.
type SecretRef struct {
	Name     string
	Resolves bool
}

// DestinationSetting is one row of switchyard.destinations as the
// configuration page shows it.
type DestinationSetting struct {
	Name, Kind, Address string
	Secrets             []SecretRef
	// Permanent is the delivery policy in words: the statuses that
	// dead-letter at once.
	Permanent                         string
	Concurrency, Rate, Retry, Breaker string
	// Problem is what is wrong with the row, "" when nothing is.
	Problem string
}

// SourceSetting is one row of switchyard.inbox_sources as the
// configuration page shows it.
type SourceSetting struct {
	Name, Scheme, Handler string
	// HandlerDetail says what a built-in handler does ("forward to crm,
	// ordered by data.id"); "" for a Go handler.
	HandlerDetail         string
	Secrets               []SecretRef
	Tolerance, OutOfOrder string
	MaxAttempts           string
	Problem               string
}
