//go:build !unix

package webhook

// stillOpen cannot look without waiting here: the connection is used, and
// if the receiver closed it, the request goes once more on a new one.
func (c *conn) stillOpen() bool { return true }
