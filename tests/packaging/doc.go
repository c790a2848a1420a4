// Package packaging checks the files operators build and run the service
// with — the Dockerfile and compose.yaml — for what matters, since they
// cannot be run where the tests run (no container engine): a pinned base,
// a static binary, a non-root user, a health check, services that wait for
// their dependencies.
package packaging
