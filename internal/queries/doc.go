// Package queries is sqlc's output for the SQL in ./sql, run against the schema
// in /migrations. Nothing here is written by hand except this file: edit the
// .sql files and run `make generate`.
package queries
