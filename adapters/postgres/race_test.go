//go:build race

package postgres_test

// raceAllocs is how many more allocations a check makes under the race
// detector (measured: 3–5), for TestCheckHTTPAllocations.
const raceAllocs = 5
