// Package migrations holds Switchyard's goose SQL migrations, embedded in the
// binary. The same files are sqlc's schema, so the generated queries always
// match the tables the console creates.
package migrations

import "embed"

// FS holds every migration file. Files are named NNNNN_what.sql and carry
// goose's "-- +goose Up" and "-- +goose Down" sections.
//
//go:embed *.sql
var FS embed.FS
