// Package e2e holds the end-to-end tests of the OTA service: they build the
// otad binary once, start real instances of it (several at once on the same
// Postgres database and Redis), and drive them over HTTP the way devices and
// operators do, checking status codes, bodies, the database, the OpenAPI
// document and the process's lifecycle (readiness, Redis outages, SIGTERM).
//
// The tests need a Postgres server and a Redis; they find them through
// tests/testenv (OTA_TEST_DATABASE_URL and OTA_TEST_REDIS_URL, else Docker)
// and are skipped when there are none:
//
//	OTA_TEST_DATABASE_URL='postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable' \
//	OTA_TEST_REDIS_URL=redis://127.0.0.1:6379/0 \
//	go test -race -count=1 ./tests/e2e/...
//
// Each test gets its own database, cloned from the migrated template, and
// its own device ids and models, so tests run in parallel without seeing
// each other.
package e2e
