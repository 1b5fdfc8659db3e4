// Package migrations holds Switchyard's goose SQL migrations, embedded in the
// binary. The same files are sqlc's schema, so the generated queries always
// match the tables the console creates.
package migrations

import "embed"

// FS holds every migration file. Files are named NNNNN_area.sql, numbered
// from 00001 without a gap (migrations_test.go checks it; README.md,
// Migrations, says how a new one is numbered), and carry goose's
// "-- +goose Up" and "-- +goose Down" sections. schema.sql beside
// them is what they produce, generated for review (make generate), and is
// neither embedded nor read by sqlc.
//
//go:embed [0-9]*.sql
var FS embed.FS
