//go:build wireinject

package main

import (
	"log/slog"

	"github.com/google/wire"
	"github.com/jmoiron/sqlx"

	"github.com/ai-device/ota/bootstrap"
)

// initPostgresApp assembles the production service on an open, migrated
// database pool and a Redis lock. Its cleanup flushes the write-behind of
// device checks and stops the catalog cache's listener; close the pool
// after it.
func initPostgresApp(cfg bootstrap.Config, db *sqlx.DB, logger *slog.Logger) (*bootstrap.App, func(), error) {
	wire.Build(bootstrap.PostgresSet, bootstrap.ApplicationSet, bootstrap.PostgresEdgeSet)
	return nil, nil, nil
}

// initMemoryApp assembles the single-process service with in-memory
// adapters, for trying the service out.
func initMemoryApp(cfg bootstrap.Config, logger *slog.Logger) (*bootstrap.App, func(), error) {
	wire.Build(bootstrap.MemorySet, bootstrap.ApplicationSet, bootstrap.EdgeSet)
	return nil, nil, nil
}
