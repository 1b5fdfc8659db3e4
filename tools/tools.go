// Package tools pins the developer tools that stay out of the application's
// go.mod: sqlc drags in dozens of modules that would move the app's versions.
// Run them with `go tool -modfile=tools/go.mod NAME`.
package tools
