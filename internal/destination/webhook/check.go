package webhook

// CheckURL reports what is wrong with raw as a destination's URL (not
// http or https, no host, unparsable), nil if nothing is: New's own check,
// for the configuration page.
func CheckURL(raw string) error {
	_, err := parseURL(raw)
	return err
}
