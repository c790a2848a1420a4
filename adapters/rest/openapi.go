package rest

import (
	_ "embed"
	"net/http"

	"github.com/labstack/echo/v4"
)

//go:embed openapi.yaml
var openAPIDoc []byte

// OpenAPISpec returns the OpenAPI 3 document of the HTTP API, the one served
// at /openapi.yaml. Tests outside this package (end-to-end suites) use it to
// validate real responses against the contract. The caller gets its own
// copy and may modify it.
func OpenAPISpec() []byte {
	return append([]byte(nil), openAPIDoc...)
}

func serveOpenAPI(c echo.Context) error {
	return c.Blob(http.StatusOK, "application/yaml", openAPIDoc)
}
