package httpedge

import (
	"net"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/ai-device/ota/domain"
)

// ctxActor keeps the operator acting in a request (domain.Actor) on its
// echo.Context: the admin authentication sets it (adapters/rest), and
// every admin handler, whichever adapter mounted it, passes it on.
const ctxActor = "ota.actor"

// SetActor records who acts in the request c.
func SetActor(c echo.Context, a domain.Actor) { c.Set(ctxActor, a) }

// ActorIn is who acts in the request c (SetActor); the zero Actor, which
// may change nothing, if the request was not authenticated as an operator.
func ActorIn(c echo.Context) domain.Actor {
	a, _ := c.Get(ctxActor).(domain.Actor)
	return a
}

// SourceAddress is the address a request came from, as the audit log and
// the sign-in budgets name it: the connection's peer. A forwarded-for
// header is the client's word, and a record must not be forgeable by the
// operator it names; behind a proxy the peer is the proxy.
func SourceAddress(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// ActorOf is p acting in the request r: what every operator's change
// takes, for its audit record (the API's and the console's alike).
func ActorOf(r *http.Request, p domain.Principal) (domain.Actor, error) {
	return domain.NewActor(p, RequestIDFrom(r.Context()), SourceAddress(r))
}
