package application_test

import "github.com/ai-device/ota/domain"

// testActor is the operator the tests' changes are made by: the root.
var testActor = actorFor(domain.RootPrincipal())
