//go:build !race

package postgres_test

// raceAllocs is 0 without the race detector (TestCheckHTTPAllocations).
const raceAllocs = 0
