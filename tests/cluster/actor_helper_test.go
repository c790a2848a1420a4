package cluster

import "github.com/ai-device/ota/domain"

// testActor is the operator the tests' changes are made by: the root.
var testActor = func() domain.Actor {
	a, err := domain.NewActor(domain.RootPrincipal(), "test", "127.0.0.1")
	if err != nil {
		panic(err)
	}
	return a
}()
