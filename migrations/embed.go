// Package migrations holds the database schema as numbered goose SQL
// migrations, embedded so the otad binary migrates its database without any
// files beside it (otad serve migrates on start; otad migrate up|down|status
// runs them by hand). Files are never edited once released: a schema change
// is a new numbered file, so every database can be brought forward from
// whatever version it is at.
package migrations

import "embed"

// FS holds every migration file. Test helpers hash it to name their
// migrated template database, so a changed schema gets a fresh template.
//
//go:embed *.sql
var FS embed.FS
