// Package readme runs the README's walk-through as a newcomer would paste
// it: every shell block marked runnable, in order, in one bash, against a
// freshly built otad serving with OTA_STORE=memory. A README that drifts
// from the service (a renamed field, a reordered step, a value not
// captured) fails here instead of in a reader's terminal.
package readme
