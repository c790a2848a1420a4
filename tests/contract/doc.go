// Package contract holds the behaviour every adapter of a port must show,
// written once and run against each adapter (memory, Postgres, Redis): the
// in-process fakes used by fast tests and the dev mode are only worth having
// if they fail and succeed exactly where the real adapters do.
//
// Each suite takes a constructor and runs subtests in parallel with their
// own uniquely named data, so one shared store (one database) serves them
// all and leftovers from earlier runs do not disturb them.
package contract
