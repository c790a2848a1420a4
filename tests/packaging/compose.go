package packaging

import (
	"fmt"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Compose is the part of a compose file these checks read.
type Compose struct {
	Services map[string]Service `yaml:"services"`
}

// Service is one compose service.
type Service struct {
	Image       string               `yaml:"image"`
	Build       any                  `yaml:"build"`
	Environment map[string]string    `yaml:"environment"`
	DependsOn   map[string]DependsOn `yaml:"depends_on"`
	Healthcheck *struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
}

// DependsOn is the long form of a depends_on entry.
type DependsOn struct {
	Condition string `yaml:"condition"`
}

// CheckCompose returns what is wrong with compose.yaml for this service:
// Postgres, Redis and otad, each with a health check; otad built from the
// repository, started only once both dependencies are healthy, and pointed
// at them by their service names; dependency images pinned.
func CheckCompose(text string) []string {
	var c Compose
	if err := yaml.Unmarshal([]byte(text), &c); err != nil {
		return []string{fmt.Sprintf("compose.yaml does not parse: %v", err)}
	}
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	names := make([]string, 0, len(c.Services))
	for n := range c.Services {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, want := range []string{"otad", "postgres", "redis"} {
		if _, ok := c.Services[want]; !ok {
			bad("no %s service (services: %v)", want, names)
		}
	}
	for _, n := range names {
		s := c.Services[n]
		if s.Healthcheck == nil || len(s.Healthcheck.Test) == 0 || s.Healthcheck.Test[0] == "NONE" {
			bad("service %s has no health check", n)
		}
		if s.Build == nil {
			ref := ParseImageRef(s.Image)
			if ref.Tag == "" || ref.Tag == "latest" {
				bad("service %s: image %q is not pinned to a tag", n, s.Image)
			}
			if ref.Digest != "" && !digestRE.MatchString(ref.Digest) {
				bad("service %s: image %q has a malformed digest", n, s.Image)
			}
		}
	}
	otad, ok := c.Services["otad"]
	if !ok {
		return problems
	}
	if otad.Build == nil {
		bad("otad is not built from the repository (no build:)")
	}
	for _, dep := range []string{"postgres", "redis"} {
		if d, ok := otad.DependsOn[dep]; !ok || d.Condition != "service_healthy" {
			bad("otad does not wait for %s to be healthy (depends_on condition service_healthy)", dep)
		}
	}
	for v, host := range map[string]string{"OTA_DATABASE_URL": "@postgres:", "OTA_REDIS_URL": "//redis:"} {
		if !strings.Contains(otad.Environment[v], host) {
			bad("otad's %s %q does not name the %s service", v, otad.Environment[v], strings.Trim(host, "@/:"))
		}
	}
	if _, ok := otad.Environment["OTA_ADMIN_TOKEN"]; !ok {
		bad("otad has no OTA_ADMIN_TOKEN: serve refuses to start without it")
	}
	return problems
}
