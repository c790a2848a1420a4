package artifactfile_test

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ai-device/ota/domain"
)

// A sw-description as SWUpdate's documentation writes them: comments,
// a board-specific group, images with sha256 and properties.
const realDescription = `# SWUpdate description of the camera image
software =
{
	version = "2.4.1";
	description = "Camera firmware " "2.4";  /* adjacent strings join */
	hardware-compatibility: [ "1.0", "revB" ];

	cam-x1 = {
		hardware-compatibility = [ "revC" ];
		stable = {
			images: (
				{
					filename = "rootfs.ext4";
					device = "/dev/mmcblk0p2";
					sha256 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
					installed-directly = true;
					properties = { size = 0x10000L; ratio = 1.5e3; };
				}
			);
		};
	};
	// trailing comment
};
`

func TestSWUWithGNUCpio(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"newc", "crc"} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			data := writeSWUWithCpio(t, format, realDescription)
			meta := mustInspect(t, "camera.swu", data)
			want := domain.ArtifactMeta{
				Format:      domain.ArtifactSWU,
				Version:     "2.4.1",
				Description: "Camera firmware 2.4",
				DeviceTypes: []string{"1.0", "revB", "revC"},
			}
			if !reflect.DeepEqual(meta, want) {
				t.Errorf("meta\n%+v, want\n%+v", meta, want)
			}
		})
	}
}

func TestSWUVersionOnlyInBoards(t *testing.T) {
	t.Parallel()
	agree := `software = { a = { version = "3.0"; }; b = { stable = { version = "3.0"; }; }; };`
	if meta := mustInspect(t, "x.swu", swuOf(agree)); meta.Version != "3.0" {
		t.Errorf("boards that agree: version %q", meta.Version)
	}
	// Boards that disagree say nothing definite: the operator types it.
	differ := `software = { a = { version = "3.0"; }; b = { version = "3.1"; }; };`
	if meta := mustInspect(t, "x.swu", swuOf(differ)); meta.Version != "" {
		t.Errorf("boards that differ: version %q", meta.Version)
	}
	// The top-level one wins over the boards'.
	top := `software = { version = "1.0"; a = { version = "3.0"; }; };`
	if meta := mustInspect(t, "x.swu", swuOf(top)); meta.Version != "1.0" {
		t.Errorf("top level: version %q", meta.Version)
	}
}

// TestLibconfigSyntax: the forms libconfig accepts are read.
func TestLibconfigSyntax(t *testing.T) {
	t.Parallel()
	for name, desc := range map[string]string{
		"no terminators":      "software = { version = \"1\" description = \"d\" }",
		"comma terminators":   `software : { version : "1", };`,
		"trailing commas":     `software = { version = "1"; hardware-compatibility = ["a", "b",]; l = (1, "x", {},,); };`,
		"adjacent strings":    `software = { version = "1" "." "0"; hardware-compatibility = ["a" "b", "c"]; };`,
		"every scalar":        `software = { version = "1"; i = -12; h = 0xFF; b = 0b101; o = 0o17; l = 9LL; f = .5; g = 1e-3; t = TRUE; n = false; };`,
		"escapes":             `software = { version = "a\"b\\c\x41\n"; };`,
		"comments everywhere": "/* a */ software /* b */ = # c\n { // d\n version = \"1\"; };",
		"empty groups":        `other = {}; software = { version = "1"; x = {}; y = []; z = (); };`,
		"names":               `software = { version = "1"; *weird_name-1 = 1; };`,
	} {
		if _, err := inspect("x.swu", swuOf(desc)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	meta := mustInspect(t, "x.swu", swuOf(`software = { version = "a\"b\\c\x41\t"; };`))
	if meta.Version != "a\"b\\cA\t" {
		t.Errorf("escapes read as %q", meta.Version)
	}
}

// TestSWURefusals: each malformed sw-description is refused with the line
// and what was expected.
func TestSWURefusals(t *testing.T) {
	t.Parallel()
	cases := []struct{ desc, want string }{
		{"software =\n{\n\tversion = \"1.0\"\n\thardware-compatibility: [\"1.0\" 2];\n};",
			"sw-description: line 4: expected ',' or ']', found the number 2"},
		{"software = {\n version = \"1.0\" 12;\n};", `sw-description: line 2: expected ';' after the value of "version", found the number 12`},
		{"software = {\n version \"1.0\";\n};", `sw-description: line 2: expected '=' or ':' after "version", found a string`},
		{"software = {\n version = \"1.0\";\n", "sw-description: line 3: the group opened on line 1 is not closed (missing '}')"},
		{"software = {\n version = \"1.0;\n};", "sw-description: line 2: a string is not closed"},
		{"software = { version = \"1\"; x = [1, \"a\"]; };", "sw-description: line 1: an array holds values of one type, a string here is not an integer"},
		{"software = { version = \"1\"; x = [{}]; };", "sw-description: line 1: expected a value, found '{'"},
		{"software = { version = \"1\"; x = (1, 2; };", "sw-description: line 1: expected ',' or ')', found ';'"},
		{"software = { version = \"1\"; version = \"2\"; };", `sw-description: line 1: duplicate setting "version" (first on line 1)`},
		{"software = { version = 1.0; };", "sw-description: line 1: software.version must be a string"},
		{"software = { version = \"1\"; hardware-compatibility = \"1.0\"; };", "sw-description: line 1: software.hardware-compatibility must be an array of strings"},
		{"software = { version = \"1\"; hardware-compatibility = [1, 2]; };", "sw-description: line 1: software.hardware-compatibility must be an array of strings"},
		{"software = { description = \"no version\"; };", "sw-description: missing software.version"},
		{"images = ();", "sw-description: no software group"},
		{"software = \"1.0\";", "sw-description: line 1: software must be a group"},
		{"@include \"other.cfg\"\nsoftware = {};", "sw-description: line 1: @include and other directives are not supported"},
		{"software = { version = \"1\"; n = 0x; };", `sw-description: line 1: "0x" is not a number`},
		{"software = { version = \"1\"; n = --1; };", `sw-description: line 1: "-" is not a number`},
		{"software = { version = \"1\"; n = 1.2.3; };", `sw-description: line 1: "1.2.3" is not a number`},
		{"software = { version = \"1\"; s = \"\\q\"; };", `sw-description: line 1: unknown escape \q`},
		{"/* open\nsoftware = {};", "sw-description: line 1: a comment /* is not closed"},
		{"software = { version = \"1\"; } }", "sw-description: line 1: expected a setting name, found '}'"},
		{"software = { version = \"1\" ] };", "sw-description: line 1: expected ';' after the value of \"version\", found ']'"},
		{"software = { version = \"1\"; x = $; };", "sw-description: line 1: unexpected character '$'"},
		{"software = {\n\n\n version = maybe; };", `sw-description: line 4: expected a value, found "maybe"`},
		{strings.Repeat("a = {", 70) + strings.Repeat("};", 70), "sw-description: line 1: nested deeper than 64 levels"},
	}
	for _, c := range cases {
		wantReason(t, "x.swu", swuOf(c.desc), c.want)
	}
}

func TestSWUArchiveRefusals(t *testing.T) {
	t.Parallel()
	good := newc{name: "sw-description", data: []byte(`software = { version = "1"; };`)}
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"wrong magic", append([]byte("070707"), good.bytes()[6:]...), `not a cpio newc or crc archive (magic "070707"`},
		{"a tar", []byte(strings.Repeat("x", 200)), `not a cpio newc or crc archive`},
		{"empty", nil, "truncated: the file ends inside the first cpio header"},
		{"cut in the header", good.bytes()[:60], "truncated: the file ends inside the first cpio header"},
		{"cut in the name", good.bytes()[:115], "truncated: the file ends inside the first entry's name"},
		{"cut in the description", good.bytes()[:130], "truncated: the file ends inside sw-description"},
		{"another first", newc{name: "rootfs.img", data: []byte("x")}.bytes(), `the first entry is "rootfs.img", not sw-description`},
		{"a path first", newc{name: "./sw-description", data: []byte("x")}.bytes(), `the first entry is "./sw-description", not sw-description`},
		{"an empty archive", newc{name: "TRAILER!!!"}.bytes(), `the first entry is "TRAILER!!!", not sw-description`},
		{"not hex", []byte("070701" + strings.Repeat("0", 8*6) + "0000ZZZZ" + strings.Repeat("0", 8*6) + "\x00\x00\x00\x00"),
			`cpio header: field 7 is "0000ZZZZ", not 8 hex digits`},
		{"a huge name", newc{name: "sw-description", nameSize: u32(0xFFFFFFFF)}.bytes(), "cpio header: a name of 4294967295 bytes"},
		{"no name", newc{name: "sw-description", nameSize: u32(0)}.bytes(), "cpio header: a name of 0 bytes"},
		{"name without NUL", newc{name: "sw-description", nameSize: u32(14)}.bytes(), "the first entry's name does not end with NUL"},
		{"a huge description", newc{name: "sw-description", data: []byte("x"), fileSize: u32(1<<20 + 1)}.bytes(),
			"sw-description is 1048577 bytes, more than 1048576"},
		{"a wrong crc", newc{magic: "070702", name: "sw-description", data: good.data, check: u32(7)}.bytes(),
			"sw-description: its cpio checksum is"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { wantReason(t, "x.swu", c.data, c.want) })
	}
	// The crc format's checksum, when right, passes.
	mustInspect(t, "x.swu", newc{magic: "070702", name: "sw-description", data: good.data}.bytes())
}

func TestSWUFixtures(t *testing.T) {
	t.Parallel()
	for file, want := range map[string]string{
		"wrong-magic.swu":              `not a cpio newc or crc archive (magic "070707"`,
		"malformed-sw-description.swu": `sw-description: line 4: expected '=' or ':' after "hardware-compatibility", found '['`,
		"huge-sw-description.swu":      "sw-description is 4294967295 bytes, more than 1048576",
	} {
		wantReason(t, file, readFile(t, filepath.Join("testdata", file)), want)
	}
}
