// Package layers holds no code: its test checks that imports point one
// way (ARCHITECTURE.md): cmd -> handlers -> engine packages -> queries ->
// pgx; templates and transports never import queries; the engine never
// imports the console or echo; nothing under internal imports cmd.
package layers
