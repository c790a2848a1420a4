package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/ai-device/ota/adapters/rest"
)

// expectedCoverage lists, per scenario, responses (operationId and status)
// it must have produced: the conformance check below is only as good as
// what it sees, so a scenario that stops producing them fails loudly
// instead of silently shrinking the check.
var expectedCoverage = map[string][]string{
	"Walkthrough": {"registerDevice 201", "publishFirmware 201", "startRollout 201", "check 200", "getTask 200",
		"reportEvent 200", "reportEvent 409", "getDevice 200", "getRollout 200", "listTasks 200"},
	"ConcurrentDuplicateChecks": {"check 200"},
	"RedisOutage":               {"check 200", "check 503", "readyz 503", "readyz 200"},
	"LockHeldElsewhere":         {"check 200", "check 503"},
	"RequestIDsAndErrors": {"healthz 200", "readyz 200", "metrics 200", "openapi 200", "registerDevice 400",
		"registerDevice 409", "registerDevice 413", "registerDevice 415", "check 401", "check 403", "check 409",
		"getTask 404", "getDevice 401", "getDevice 404", "reportEvent 400", "publishFirmware 409", "startRollout 404",
		"listTasks 401"},
	"GracefulShutdown": {"check 200"},
	"RateLimits":       {"check 200", "check 429", "reportEvent 200", "reportEvent 429", "reportEvent 409"},
}

// testOpenAPIConformance validates every response the scenarios recorded
// (method, route, status, headers, body) against the OpenAPI document the
// service serves (the bytes of /openapi.yaml, checked equal by
// RequestIDsAndErrors), with kin-openapi. Responses to paths the document
// does not have (unknown routes, wrong methods) must still be ErrorBody.
func testOpenAPIConformance(t *testing.T) {
	all := recorded.all()
	if len(all) == 0 {
		t.Skip("no scenario ran (filtered out or skipped): nothing to check")
	}
	doc, router := loadOpenAPI(t)
	errorBody := doc.Components.Schemas["ErrorBody"].Value

	seen := map[string]map[string]bool{} // scenario → "operationId status"
	for i, x := range all {
		scenario := scenarioOf(x.test)
		if seen[scenario] == nil {
			seen[scenario] = map[string]bool{}
		}
		route, err := validateExchange(router, x)
		if route != nil {
			seen[scenario][fmt.Sprintf("%s %d", route.Operation.OperationID, x.status)] = true
		}
		if errors.Is(err, errUnrouted) {
			// No documented operation: only an error is acceptable, in the
			// documented shape.
			err = nil
			var v any
			switch {
			case x.status != http.StatusNotFound && x.status != http.StatusMethodNotAllowed:
				err = fmt.Errorf("%d for a path and method the document does not have; want 404 or 405", x.status)
			case json.Unmarshal(x.body, &v) != nil:
				err = errors.New("the body is not JSON")
			default:
				err = errorBody.VisitJSON(v)
			}
		}
		if err != nil {
			t.Errorf("exchange #%d of %s: %s %s → %d does not match the document: %v\nbody: %s",
				i, x.test, x.method, x.url, x.status, err, truncate(x.body, 800))
		}
	}
	for scenario, want := range expectedCoverage {
		if seen[scenario] == nil {
			continue // skipped or filtered out
		}
		for _, w := range want {
			if !seen[scenario][w] {
				t.Errorf("scenario %s produced no %q response to check", scenario, w)
			}
		}
	}
	t.Logf("validated %d responses against openapi.yaml", len(all))

	// The validator must be able to fail: a real response broken on purpose
	// is refused.
	for _, x := range all {
		if x.status != http.StatusServiceUnavailable || !strings.Contains(x.url, "/ota/check") {
			continue
		}
		broken := x
		broken.header = x.header.Clone()
		broken.header.Del("Retry-After")
		if _, err := validateExchange(router, broken); err == nil {
			t.Errorf("a SERVICE_BUSY answer without Retry-After passed validation: the check is not working")
		}
		break
	}
	for _, x := range all {
		if x.status != http.StatusOK || !strings.Contains(x.url, "/ota/check") {
			continue
		}
		broken := x
		broken.body = bytes.Replace(x.body, []byte(`"poll_after_seconds":`), []byte(`"poll_after":`), 1)
		if _, err := validateExchange(router, broken); err == nil {
			t.Errorf("a check answer without poll_after_seconds passed validation: the check is not working")
		}
		break
	}
}

var errUnrouted = errors.New("no documented operation")

// validateExchange finds the exchange's operation and validates the
// response against it.
func validateExchange(router routers.Router, x exchange) (*routers.Route, error) {
	req, err := http.NewRequest(x.method, x.url, bytes.NewReader(x.reqBody))
	if err != nil {
		return nil, err
	}
	req.Header = x.reqHeader.Clone()
	route, params, err := router.FindRoute(req)
	if err != nil {
		if errors.Is(err, routers.ErrPathNotFound) || errors.Is(err, routers.ErrMethodNotAllowed) {
			return nil, errUnrouted
		}
		return nil, err
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 x.status,
		Header:                 x.header,
		Body:                   io.NopCloser(bytes.NewReader(x.body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	return route, openapi3filter.ValidateResponse(context.Background(), in)
}

func loadOpenAPI(t *testing.T) (*openapi3.T, routers.Router) {
	t.Helper()
	// Task ids are UUIDs; kin-openapi checks the format only when told how.
	openapi3.DefineStringFormatValidator("uuid", openapi3.NewRegexpFormatValidator(openapi3.FormatOfStringForUUIDOfRFC9562))
	doc, err := openapi3.NewLoader().LoadFromData(rest.OpenAPISpec())
	if err != nil {
		t.Fatalf("loading openapi.yaml: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.yaml is not a valid OpenAPI 3 document: %v", err)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatalf("routing openapi.yaml: %v", err)
	}
	return doc, router
}

// scenarioOf maps "TestE2E/scenarios/RequestIDsAndErrors/no_credentials" to
// "RequestIDsAndErrors".
func scenarioOf(test string) string {
	parts := strings.Split(test, "/")
	if i := slices.Index(parts, "scenarios"); i >= 0 && i+1 < len(parts) {
		return parts[i+1]
	}
	return test
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
