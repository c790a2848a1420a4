package packaging

import (
	"fmt"
	"regexp"
	"strings"
)

// Instruction is one Dockerfile instruction, continuation lines joined.
type Instruction struct {
	Line int    // where it starts, 1-based
	Cmd  string // upper-cased: FROM, RUN, USER, ...
	Args string // the rest, continuations joined by a space
}

// Stage is the instructions from one FROM to the next.
type Stage struct {
	Image string // the FROM argument (image reference or earlier stage)
	Name  string // the AS name, lower-cased; "" when unnamed
	Insts []Instruction
}

// ParseDockerfile splits a Dockerfile into stages. It is a line-based
// reader of the subset real Dockerfiles use — comments, parser directives,
// backslash continuations, FROM [--platform=…] image [AS name] — not a full
// implementation of BuildKit's grammar (heredocs, escape directives other
// than the default are refused rather than misread). BuildKit's own parser
// (github.com/moby/buildkit) is not among the modules this project may use.
func ParseDockerfile(text string) ([]Stage, error) {
	var (
		stages []Stage
		cur    *Instruction
		buf    strings.Builder
	)
	flush := func() error {
		if cur == nil {
			return nil
		}
		cur.Args = strings.TrimSpace(buf.String())
		buf.Reset()
		in := *cur
		cur = nil
		if in.Cmd == "FROM" {
			s, err := parseFrom(in)
			if err != nil {
				return err
			}
			stages = append(stages, s)
			return nil
		}
		if len(stages) == 0 {
			if in.Cmd == "ARG" { // ARGs before the first FROM parameterise it
				return nil
			}
			return fmt.Errorf("line %d: %s before the first FROM", in.Line, in.Cmd)
		}
		last := &stages[len(stages)-1]
		last.Insts = append(last.Insts, in)
		return nil
	}
	for i, raw := range strings.Split(text, "\n") {
		n := i + 1
		line := strings.TrimRight(raw, " \t\r")
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") {
			if cur == nil && strings.HasPrefix(strings.ToLower(strings.ReplaceAll(trimmed, " ", "")), "#escape=") {
				return nil, fmt.Errorf("line %d: escape directives are not supported by this reader", n)
			}
			continue // comments, also inside a continued instruction
		}
		if cur == nil {
			if trimmed == "" {
				continue
			}
			cmd, rest, _ := strings.Cut(trimmed, " ")
			cur = &Instruction{Line: n, Cmd: strings.ToUpper(cmd)}
			line = rest
			if strings.Contains(rest, "<<") && (cur.Cmd == "RUN" || cur.Cmd == "COPY") {
				return nil, fmt.Errorf("line %d: heredocs are not supported by this reader", n)
			}
		} else if trimmed == "" {
			continue // an empty line inside a continuation is ignored
		}
		if cont, ok := strings.CutSuffix(line, `\`); ok {
			buf.WriteString(strings.TrimSpace(cont))
			buf.WriteByte(' ')
			continue
		}
		buf.WriteString(strings.TrimSpace(line))
		if err := flush(); err != nil {
			return nil, err
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("line %d: %s continues past the end of the file", cur.Line, cur.Cmd)
	}
	if len(stages) == 0 {
		return nil, fmt.Errorf("no FROM")
	}
	return stages, nil
}

func parseFrom(in Instruction) (Stage, error) {
	f := strings.Fields(in.Args)
	for len(f) > 0 && strings.HasPrefix(f[0], "--") {
		f = f[1:]
	}
	switch {
	case len(f) == 1:
		return Stage{Image: f[0]}, nil
	case len(f) == 3 && strings.EqualFold(f[1], "AS"):
		return Stage{Image: f[0], Name: strings.ToLower(f[2])}, nil
	}
	return Stage{}, fmt.Errorf("line %d: cannot read FROM %q", in.Line, in.Args)
}

// Last returns the stage's last instruction named cmd, and whether there is one.
func (s Stage) Last(cmd string) (Instruction, bool) {
	for i := len(s.Insts) - 1; i >= 0; i-- {
		if s.Insts[i].Cmd == cmd {
			return s.Insts[i], true
		}
	}
	return Instruction{}, false
}

var (
	digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	tagRE    = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
)

var cgoRE = regexp.MustCompile(`(?:^|\s)CGO_ENABLED=([01])(?:\s|$)`)

// staticBuild reports whether the stage's go build runs with cgo off: the
// last ENV setting before it, overridden by an assignment on the RUN line
// itself ahead of "go build". It also returns that RUN.
func staticBuild(s Stage) (static bool, build Instruction) {
	for _, in := range s.Insts {
		switch in.Cmd {
		case "ENV":
			if m := cgoRE.FindStringSubmatch(in.Args); m != nil {
				static = m[1] == "0"
			}
		case "RUN":
			i := strings.Index(in.Args, "go build")
			if i < 0 {
				continue
			}
			if m := cgoRE.FindStringSubmatch(in.Args[:i]); m != nil {
				static = m[1] == "0"
			}
			return static, in
		}
	}
	return false, Instruction{}
}

// ImageRef is an image reference split into its parts.
type ImageRef struct {
	Name, Tag, Digest string
}

// ParseImageRef splits name[:tag][@digest]; a registry's port is not a tag.
func ParseImageRef(ref string) ImageRef {
	var r ImageRef
	ref, r.Digest, _ = strings.Cut(ref, "@")
	if i := strings.LastIndexByte(ref, ':'); i > strings.LastIndexByte(ref, '/') {
		ref, r.Tag = ref[:i], ref[i+1:]
	}
	r.Name = ref
	return r
}

// CheckDockerfile returns what is wrong with a Dockerfile for this service,
// one sentence per problem; none means it builds a pinned, static,
// non-root, health-checked image. goVersion is go.mod's go line: the Go
// image must carry exactly that version, so the image builds with the
// toolchain the module asks for.
func CheckDockerfile(text, goVersion string) []string {
	stages, err := ParseDockerfile(text)
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	names := map[string]bool{}
	buildStage := -1
	for i, s := range stages {
		if names[strings.ToLower(s.Image)] {
			names[s.Name] = true
			continue // built FROM an earlier stage
		}
		if s.Name != "" {
			names[s.Name] = true
		}
		if strings.Contains(s.Image, "$") {
			bad("stage %d: base image %q is an ARG: it cannot be checked for a pin", i+1, s.Image)
			continue
		}
		ref := ParseImageRef(s.Image)
		switch {
		case ref.Tag == "":
			bad("stage %d: base image %q has no tag", i+1, s.Image)
		case ref.Tag == "latest":
			bad("stage %d: base image %q floats on latest", i+1, s.Image)
		case !tagRE.MatchString(ref.Tag):
			bad("stage %d: base image %q has a malformed tag", i+1, s.Image)
		}
		if ref.Digest != "" && !digestRE.MatchString(ref.Digest) {
			bad("stage %d: base image %q has a malformed digest", i+1, s.Image)
		}
		if ref.Name == "golang" || strings.HasSuffix(ref.Name, "/golang") {
			if v, _, _ := strings.Cut(ref.Tag, "-"); v != goVersion {
				bad("stage %d: Go image %q is not go.mod's go %s", i+1, s.Image, goVersion)
			}
		}
		for _, in := range s.Insts {
			if in.Cmd == "RUN" && strings.Contains(in.Args, "go build") {
				buildStage = i
			}
		}
	}

	if buildStage < 0 {
		bad("no stage runs go build")
	} else {
		s := stages[buildStage]
		static, build := staticBuild(s)
		if !static {
			bad("the go build stage does not set CGO_ENABLED=0: the binary would not be static")
		}
		if buildStage == len(stages)-1 {
			bad("the final stage is the build stage: the image would carry the Go toolchain")
		}
		if !strings.Contains(build.Args, "-X main.version=") || !strings.Contains(build.Args, "-X main.commit=") {
			bad("go build does not stamp main.version and main.commit")
		}
	}

	final := stages[len(stages)-1]
	if u, ok := final.Last("USER"); !ok {
		bad("the final stage has no USER: it would run as root")
	} else if user, _, _ := strings.Cut(u.Args, ":"); user == "root" || user == "0" || user == "" {
		bad("the final stage runs as %q", u.Args)
	}
	if hc, ok := final.Last("HEALTHCHECK"); !ok {
		bad("the final stage has no HEALTHCHECK")
	} else if f := strings.Fields(hc.Args); len(f) == 0 || strings.EqualFold(f[0], "NONE") || !strings.Contains(hc.Args, "CMD") {
		bad("HEALTHCHECK %q does not run a command", hc.Args)
	} else if !strings.Contains(hc.Args, "healthcheck") && !strings.Contains(hc.Args, "/healthz") {
		bad("HEALTHCHECK %q does not probe /healthz", hc.Args)
	}
	if _, ok := final.Last("ENTRYPOINT"); !ok {
		if _, ok := final.Last("CMD"); !ok {
			bad("the final stage has neither ENTRYPOINT nor CMD")
		}
	}
	return problems
}
