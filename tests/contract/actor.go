package contract

import "github.com/ai-device/ota/domain"

// testActor is the operator every suite's change is made by: the root,
// in a request the suites name.
var testActor = func() domain.Actor {
	a, err := domain.NewActor(domain.RootPrincipal(), "contract-suite", "127.0.0.1")
	if err != nil {
		panic(err)
	}
	return a
}()
