package httpedge

import "time"

// ErrorReply is what the HTTP edge answers for an error: the status, the
// contract's code and the caller-safe message.
type ErrorReply struct {
	Status  int
	Code    string
	Message string
	// Internal is true when nothing the caller did explains the error: log
	// the cause, show only the message.
	Internal bool
	// RetryAfter is what Retry-After says (0: none is sent).
	RetryAfter time.Duration
}

// DescribeError maps an error to its reply exactly as the JSON API does,
// for driving adapters on the same server (the operator console)
// that render errors their own way but must say the same thing, with the
// same words, as the API. The mapping itself stays in errors.go.
func DescribeError(err error) ErrorReply {
	r := classify(err)
	return ErrorReply{Status: r.status, Code: r.code, Message: r.message, Internal: r.internal, RetryAfter: r.retryAfter}
}
