// Package contract holds the behaviour every adapter of a port must show,
// written once and run against each adapter (memory, Postgres, Redis): the
// in-process fakes used by fast tests and the dev mode are only worth having
// if they fail and succeed exactly where the real adapters do. The
// repository suites also run over the serving wiring (postgres.ServingSet:
// checks written behind, the catalog cached), so that what production adds
// for speed is held to the same contract. Each port's suite has its own
// file (repo_devices.go, repo_firmwares.go, repo_rollouts.go,
// repo_tasks.go); repositories.go holds the runner and shared fixtures.
//
// Each suite takes a constructor and runs subtests in parallel with their
// own uniquely named data, so one shared store (one database) serves them
// all and leftovers from earlier runs do not disturb them.
package contract
