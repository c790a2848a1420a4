package packaging

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func readRepoFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// goModVersion is the go line of go.mod.
func goModVersion(t *testing.T) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindStringSubmatch(readRepoFile(t, "go.mod"))
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	return m[1]
}

func TestDockerfile(t *testing.T) {
	text := readRepoFile(t, "Dockerfile")
	if problems := CheckDockerfile(text, goModVersion(t)); len(problems) > 0 {
		t.Fatalf("Dockerfile:\n  %s", strings.Join(problems, "\n  "))
	}
	stages, err := ParseDockerfile(text)
	if err != nil {
		t.Fatal(err)
	}
	// Pinned by digest too, not by tag alone: a tag can be moved.
	for _, s := range stages {
		if ParseImageRef(s.Image).Digest == "" {
			t.Errorf("base image %s is not pinned by digest", s.Image)
		}
	}
	// The HEALTHCHECK runs the binary the image ships.
	final := stages[len(stages)-1]
	hc, _ := final.Last("HEALTHCHECK")
	entry, _ := final.Last("ENTRYPOINT")
	if !strings.Contains(hc.Args, `"/usr/local/bin/otad", "healthcheck"`) || !strings.Contains(entry.Args, `"/usr/local/bin/otad"`) {
		t.Errorf("HEALTHCHECK %q / ENTRYPOINT %q do not run the shipped /usr/local/bin/otad", hc.Args, entry.Args)
	}
}

// Each way of getting the image wrong is caught: the checks above could
// not pass a Dockerfile that breaks them.
func TestCheckDockerfileCatches(t *testing.T) {
	const good = `# syntax=docker/dockerfile:1
FROM golang:1.26.8-bookworm AS build
ENV CGO_ENABLED=0
RUN go build -ldflags "-X main.version=v -X main.commit=c" \
      -o /out/otad .
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/otad /otad
USER 65532:65532
HEALTHCHECK --interval=10s \
  CMD ["/otad", "healthcheck"]
ENTRYPOINT ["/otad"]
`
	if p := CheckDockerfile(good, "1.26.8"); len(p) > 0 {
		t.Fatalf("the good Dockerfile was refused: %v", p)
	}
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"latest base", "static-debian12:nonroot", "static-debian12:latest", "latest"},
		{"untagged base", "static-debian12:nonroot", "static-debian12", "no tag"},
		{"bad digest", "static-debian12:nonroot", "static-debian12:nonroot@sha256:abc", "malformed digest"},
		{"other Go", "golang:1.26.8-bookworm", "golang:1.25.1-bookworm", "go.mod"},
		{"cgo on", "ENV CGO_ENABLED=0", "ENV CGO_ENABLED=1", "CGO_ENABLED=0"},
		{"cgo unset", "ENV CGO_ENABLED=0", "ENV GOFLAGS=-trimpath", "CGO_ENABLED=0"},
		{"cgo turned on inline", "RUN go build", "RUN CGO_ENABLED=1 go build", "CGO_ENABLED=0"},
		{"root user", "USER 65532:65532", "USER root", "runs as"},
		{"uid 0", "USER 65532:65532", "USER 0:0", "runs as"},
		{"no user", "USER 65532:65532\n", "", "no USER"},
		{"no healthcheck", "HEALTHCHECK --interval=10s \\\n  CMD [\"/otad\", \"healthcheck\"]\n", "", "no HEALTHCHECK"},
		{"healthcheck off", "HEALTHCHECK --interval=10s \\\n  CMD [\"/otad\", \"healthcheck\"]", "HEALTHCHECK NONE", "does not run"},
		{"unstamped", `-ldflags "-X main.version=v -X main.commit=c" `, "", "stamp"},
		{"single stage", "FROM gcr.io/distroless/static-debian12:nonroot\nCOPY --from=build /out/otad /otad\n", "", "carry the Go toolchain"},
		{"no build", "RUN go build", "RUN go vet", "no stage runs go build"},
		{"heredoc", "RUN go build", "RUN <<EOF\ngo build\nEOF\nRUN go build", "heredocs"},
	} {
		bad := strings.Replace(good, tc.old, tc.new, 1)
		if bad == good {
			t.Fatalf("%s: the replacement changed nothing", tc.name)
		}
		p := CheckDockerfile(bad, "1.26.8")
		if !strings.Contains(strings.Join(p, "\n"), tc.want) {
			t.Errorf("%s: problems %q, want one mentioning %q", tc.name, p, tc.want)
		}
	}
}

func TestParseImageRef(t *testing.T) {
	for in, want := range map[string]ImageRef{
		"golang:1.26.8-bookworm@sha256:ab": {"golang", "1.26.8-bookworm", "sha256:ab"},
		"gcr.io/distroless/static":         {"gcr.io/distroless/static", "", ""},
		"registry:5000/team/img":           {"registry:5000/team/img", "", ""},
		"registry:5000/team/img:v2":        {"registry:5000/team/img", "v2", ""},
		"postgres@sha256:cd":               {"postgres", "", "sha256:cd"},
	} {
		if got := ParseImageRef(in); got != want {
			t.Errorf("ParseImageRef(%q) = %+v, want %+v", in, got, want)
		}
	}
}

func TestCompose(t *testing.T) {
	if problems := CheckCompose(readRepoFile(t, "compose.yaml")); len(problems) > 0 {
		t.Fatalf("compose.yaml:\n  %s", strings.Join(problems, "\n  "))
	}
}

func TestCheckComposeCatches(t *testing.T) {
	good := readRepoFile(t, "compose.yaml")
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"no redis", "  redis:\n    image:", "  cache:\n    image:", "no redis service"},
		{"otad starts before postgres is healthy", "      postgres:\n        condition: service_healthy", "      postgres:\n        condition: service_started", "wait for postgres"},
		{"latest postgres", "postgres:15-alpine@", "postgres:latest@", "not pinned"},
		{"no otad health check", "      test: [\"CMD\", \"/usr/local/bin/otad\", \"healthcheck\"]", "      test: [\"NONE\"]", "otad has no health check"},
		{"redis on localhost", "redis://redis:6379/0", "redis://127.0.0.1:6379/0", "OTA_REDIS_URL"},
		{"not yaml", "services:", "services: [", "does not parse"},
	} {
		bad := strings.Replace(good, tc.old, tc.new, 1)
		if bad == good {
			t.Fatalf("%s: the replacement changed nothing", tc.name)
		}
		if p := CheckCompose(bad); !strings.Contains(strings.Join(p, "\n"), tc.want) {
			t.Errorf("%s: problems %q, want one mentioning %q", tc.name, p, tc.want)
		}
	}
}
