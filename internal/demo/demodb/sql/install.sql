-- name: SchemaInstalled :one
-- SchemaInstalled reports whether the demo's schema exists (Install).
SELECT (to_regnamespace('switchyard_demo') IS NOT NULL)::boolean AS installed;
