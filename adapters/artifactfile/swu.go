package artifactfile

import (
	"io"
	"strconv"

	"github.com/ai-device/ota/domain"
)

// An SWUpdate image (.swu) is a cpio archive in the "newc" (magic 070701)
// or "crc" (070702) format whose first entry is sw-description, the
// libconfig text SWUpdate reads before anything else; the images follow.
// Each entry is a 110-byte ASCII header (the magic and thirteen 8-digit
// hex fields), the NUL-terminated name, padding to 4 bytes, the data,
// padding to 4 bytes.

const (
	cpioHeaderLen = 110
	// maxCpioName is SWUpdate's own bound on an entry's name
	// (MAX_IMAGE_FNAME): a longer one fails there too.
	maxCpioName = 256
)

// readSWU reads a .swu file's sw-description into its metadata.
func readSWU(src io.Reader) (domain.ArtifactMeta, error) {
	var h [cpioHeaderLen]byte
	if _, err := io.ReadFull(src, h[:]); err != nil {
		return domain.ArtifactMeta{}, swuReadError(err, "the first cpio header")
	}
	magic := string(h[:6])
	if magic != "070701" && magic != "070702" {
		return domain.ArtifactMeta{}, formatErrorf("not a cpio newc or crc archive (magic %q, want \"070701\" or \"070702\")", magic)
	}
	// Fields after the magic, 8 hex digits each: ino, mode, uid, gid,
	// nlink, mtime, filesize, devmajor, devminor, rdevmajor, rdevminor,
	// namesize, check.
	field := func(i int) (uint32, error) {
		s := string(h[6+8*i : 6+8*i+8])
		n, err := strconv.ParseUint(s, 16, 32)
		if err != nil {
			return 0, formatErrorf("cpio header: field %d is %q, not 8 hex digits", i+1, s)
		}
		return uint32(n), nil
	}
	var vals [13]uint32
	for i := range vals {
		v, err := field(i)
		if err != nil {
			return domain.ArtifactMeta{}, err
		}
		vals[i] = v
	}
	fileSize, nameSize, check := vals[6], vals[11], vals[12]
	if nameSize == 0 || nameSize > maxCpioName {
		return domain.ArtifactMeta{}, formatErrorf("cpio header: a name of %d bytes (1 to %d are read)", nameSize, maxCpioName)
	}
	// The name and its padding: header plus name is a multiple of 4.
	nameBuf := make([]byte, nameSize+pad4(cpioHeaderLen+nameSize))
	if _, err := io.ReadFull(src, nameBuf); err != nil {
		return domain.ArtifactMeta{}, swuReadError(err, "the first entry's name")
	}
	if nameBuf[nameSize-1] != 0 {
		return domain.ArtifactMeta{}, formatErrorf("cpio header: the first entry's name does not end with NUL")
	}
	name := string(nameBuf[:nameSize-1])
	if name != "sw-description" {
		return domain.ArtifactMeta{}, formatErrorf("the first entry is %q, not sw-description", name)
	}
	if fileSize > maxEntryBytes {
		return domain.ArtifactMeta{}, formatErrorf("sw-description is %d bytes, more than %d", fileSize, maxEntryBytes)
	}
	desc := make([]byte, fileSize)
	if _, err := io.ReadFull(src, desc); err != nil {
		return domain.ArtifactMeta{}, swuReadError(err, "sw-description")
	}
	if magic == "070702" {
		// The crc format's check is the sum of the data's bytes.
		var sum uint32
		for _, b := range desc {
			sum += uint32(b)
		}
		if sum != check {
			return domain.ArtifactMeta{}, formatErrorf("sw-description: its cpio checksum is %08x, the header says %08x", sum, check)
		}
	}
	root, err := parseLibconfig(desc)
	if err != nil {
		return domain.ArtifactMeta{}, formatErrorf("sw-description: %v", err)
	}
	return swDescriptionMeta(root)
}

// pad4 is the padding that brings n to a multiple of 4.
func pad4(n uint32) uint32 { return (4 - n%4) % 4 }

// swuReadError turns a short read at where into a reason.
func swuReadError(err error, where string) error {
	if r := readFailure(err, where); r != nil {
		return r
	}
	return err
}

// swDescriptionMeta reads what the service shows from a parsed
// sw-description. SWUpdate looks a field up under "software", then under
// software.<board>, software.<set>.<mode> and software.<board>.<set>.<mode>
// for the board and selection the device runs; the service knows none of
// them, so it takes software.version if set, else the one version every
// sub-group that sets one agrees on, and the hardware compatibility of
// every board together.
func swDescriptionMeta(root *cfgGroup) (domain.ArtifactMeta, error) {
	sw, ok := root.get("software")
	if !ok {
		return domain.ArtifactMeta{}, formatErrorf("sw-description: no software group")
	}
	if sw.kind != cfgGroupKind {
		return domain.ArtifactMeta{}, formatErrorf("sw-description: line %d: software must be a group { … }", sw.line)
	}
	meta := domain.ArtifactMeta{}
	var versions []string
	seenHW := map[string]bool{}
	var walk func(g *cfgGroup, at string, depth int) error
	walk = func(g *cfgGroup, at string, depth int) error {
		for _, s := range g.settings {
			where := at + "." + s.name
			switch s.name {
			case "version":
				if s.value.kind != cfgStringKind {
					return formatErrorf("sw-description: line %d: %s must be a string", s.value.line, where)
				}
				versions = append(versions, s.value.str)
			case "description":
				if depth == 0 && s.value.kind == cfgStringKind {
					meta.Description = s.value.str
				}
			case "hardware-compatibility":
				if s.value.kind != cfgArrayKind && s.value.kind != cfgListKind {
					return formatErrorf("sw-description: line %d: %s must be an array of strings", s.value.line, where)
				}
				for _, item := range s.value.items {
					if item.kind != cfgStringKind {
						return formatErrorf("sw-description: line %d: %s must be an array of strings", item.line, where)
					}
					if item.str != "" && !seenHW[item.str] {
						seenHW[item.str] = true
						meta.DeviceTypes = append(meta.DeviceTypes, item.str)
					}
				}
			default:
				// A board or selection: SWUpdate looks up to three
				// levels below software.
				if s.value.kind == cfgGroupKind && depth < 3 {
					if err := walk(s.value.group, where, depth+1); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}
	if err := walk(sw.group, "software", 0); err != nil {
		return domain.ArtifactMeta{}, err
	}
	if top, ok := sw.group.get("version"); ok {
		meta.Version = top.str
	} else if len(versions) > 0 {
		meta.Version = versions[0]
		for _, v := range versions[1:] {
			if v != meta.Version {
				// Boards disagree: the operator says which to publish.
				meta.Version = ""
				break
			}
		}
	}
	if len(versions) == 0 {
		return domain.ArtifactMeta{}, formatErrorf("sw-description: missing software.version")
	}
	return meta, nil
}
