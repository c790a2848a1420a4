package artifactfile

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"path"
	"strconv"
	"strings"

	"github.com/klauspost/compress/zstd"

	"github.com/ai-device/ota/domain"
)

// A Mender artifact (formats 2 and 3, as mender-artifact writes and the
// client's areader reads them) is an uncompressed tar whose entries come in
// a fixed order: "version" (JSON {"format":"mender","version":N}),
// "manifest" (a sha256sum listing), optionally "manifest.sig" and
// "manifest-augment", then "header.tar" compressed as its suffix says
// (.gz, .xz, .zst, or none), then the payloads ("data/0000.tar.gz", …), which
// are never read here. Inside the header, "header-info" names the artifact,
// its payloads and compatible device types, and "headers/NNNN/type-info"
// each payload's type and provides.

// menderVersion is the "version" entry.
type menderVersion struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
}

// headerInfoV3 is format 3's header-info.
type headerInfoV3 struct {
	Payloads []struct {
		Type string `json:"type"`
	} `json:"payloads"`
	ArtifactProvides struct {
		ArtifactName  string `json:"artifact_name"`
		ArtifactGroup string `json:"artifact_group"`
	} `json:"artifact_provides"`
	ArtifactDepends struct {
		DeviceType []string `json:"device_type"`
	} `json:"artifact_depends"`
}

// headerInfoV2 is format 2's header-info.
type headerInfoV2 struct {
	ArtifactName string `json:"artifact_name"`
	Updates      []struct {
		Type string `json:"type"`
	} `json:"updates"`
	DeviceTypesCompatible []string `json:"device_types_compatible"`
}

// typeInfo is a payload's headers/NNNN/type-info (format 2 has only type).
type typeInfo struct {
	Type             *string           `json:"type"`
	ArtifactProvides map[string]string `json:"artifact_provides"`
}

// maxPayloads bounds the payloads a header may declare; mender-client
// installs one, the format numbers them with four digits.
const maxPayloads = 10000

// readMender reads a .mender file's header into its metadata.
func readMender(src io.Reader) (domain.ArtifactMeta, error) {
	head := &boundedReader{r: src, left: maxHeadBytes,
		what: fmt.Sprintf("the header does not end within the first %d bytes", maxHeadBytes)}
	tr := tar.NewReader(head)

	hdr, err := tr.Next()
	if err != nil {
		return domain.ArtifactMeta{}, tarError(err, "the first entry (version)")
	}
	if hdr.Name != "version" {
		return domain.ArtifactMeta{}, formatErrorf("the first entry is %q, not version", hdr.Name)
	}
	var v menderVersion
	if err := readJSON(tr, "version", &v); err != nil {
		return domain.ArtifactMeta{}, err
	}
	if v.Format != "mender" {
		return domain.ArtifactMeta{}, formatErrorf("version: format is %q, not mender", v.Format)
	}
	if v.Version != 2 && v.Version != 3 {
		return domain.ArtifactMeta{}, formatErrorf("version: format version %d is not supported (2 and 3 are)", v.Version)
	}

	var manifest map[string]string
	for {
		hdr, err := tr.Next()
		if err != nil {
			if err == io.EOF {
				return domain.ArtifactMeta{}, formatErrorf("truncated: the file ends before its header.tar")
			}
			return domain.ArtifactMeta{}, tarError(err, "the entries before the header")
		}
		switch name := hdr.Name; {
		case name == "manifest":
			if manifest, err = readManifest(tr); err != nil {
				return domain.ArtifactMeta{}, err
			}
		case name == "manifest.sig" || name == "manifest-augment":
			// A signature is checked by the device against its key; the
			// service has none to check it with. tar skips the bytes.
		case strings.HasPrefix(name, "header.tar"):
			if manifest == nil && v.Version == 3 {
				return domain.ArtifactMeta{}, formatErrorf("%s comes before the manifest", name)
			}
			meta, payloads, err := readMenderHeader(tr, name, v.Version, manifest)
			if err != nil {
				return domain.ArtifactMeta{}, err
			}
			if err := checkPayloads(tr, payloads); err != nil {
				return domain.ArtifactMeta{}, err
			}
			return meta, nil
		default:
			return domain.ArtifactMeta{}, formatErrorf("unexpected entry %q before header.tar", name)
		}
	}
}

// readMenderHeader decompresses the header entry named name (read from
// tr), checks it against the manifest's checksum when the manifest lists
// it, and reads header-info and every type-info. It returns the metadata
// and the number of payloads.
func readMenderHeader(tr io.Reader, name string, version int, manifest map[string]string) (domain.ArtifactMeta, int, error) {
	sum := sha256.New()
	compressed := io.TeeReader(tr, sum)
	dec, closeDec, err := decompressor(name, compressed)
	if err != nil {
		return domain.ArtifactMeta{}, 0, err
	}
	defer closeDec()
	plain := &boundedReader{r: dec, left: maxHeaderBytes,
		what: fmt.Sprintf("%s: the header is larger than %d bytes once decompressed", name, maxHeaderBytes)}

	meta, payloads, err := readHeaderTar(tar.NewReader(plain), name, version)
	if err != nil {
		return domain.ArtifactMeta{}, 0, err
	}
	// Read the rest of the compressed stream (its end-of-archive blocks
	// and the compressor's own checksum) so a corrupt header is caught.
	if _, err := io.Copy(io.Discard, plain); err != nil {
		return domain.ArtifactMeta{}, 0, decompressError(err, name)
	}
	if err := checkManifestSum(name, manifest, compressed, sum); err != nil {
		return domain.ArtifactMeta{}, 0, err
	}
	return meta, payloads, nil
}

// checkPayloads walks the entries after the header without reading them:
// the outer reader seeks past each payload and reads only its last byte,
// so a file cut anywhere, payloads included, is refused as truncated at
// the cost of a few reads. An optional header-augment may come first;
// then one data/NNNN.tar* per payload, in order.
func checkPayloads(tr *tar.Reader, payloads int) error {
	n, where := 0, "the entry after the header"
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			// Next fails skipping the last entry's bytes (a payload is
			// large: most cuts fall there) or reading the next header.
			return tarError(err, where)
		}
		where = hdr.Name
		if n == 0 && strings.HasPrefix(hdr.Name, "header-augment.tar") {
			continue
		}
		if !strings.HasPrefix(hdr.Name, fmt.Sprintf("data/%04d.tar", n)) {
			return formatErrorf("unexpected entry %q where data/%04d.tar is expected", hdr.Name, n)
		}
		if n++; n > payloads {
			return formatErrorf("%s: the header declares %d payload(s)", hdr.Name, payloads)
		}
	}
	if n != payloads {
		return formatErrorf("truncated: the header declares %d payload(s), the file holds %d", payloads, n)
	}
	return nil
}

// decompressor opens the header entry by its suffix: uncompressed, gzip,
// zstd or xz (mender-artifact's "lzma"), each bounded in what it may
// allocate.
func decompressor(name string, r io.Reader) (io.Reader, func(), error) {
	switch ext := strings.TrimPrefix(name, "header.tar"); ext {
	case "":
		return r, func() {}, nil
	case ".gz":
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, nil, decompressError(err, name)
		}
		zr.Multistream(false)
		return zr, func() { _ = zr.Close() }, nil
	case ".zst":
		// A zstd frame declares its window; the decoder's own bound keeps
		// a hostile one from reserving more than this.
		zr, err := zstd.NewReader(bufio.NewReader(r), zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderMaxWindow(8<<20), zstd.WithDecoderMaxMemory(maxHeaderBytes))
		if err != nil {
			return nil, nil, decompressError(err, name)
		}
		return zr, zr.Close, nil
	case ".xz":
		zr, err := openXZ(r, name)
		if err != nil {
			return nil, nil, err
		}
		return zr, func() {}, nil
	default:
		return nil, nil, formatErrorf("%s: unknown compression %q (gzip, xz, zstd and none are read)", name, ext)
	}
}

// readHeaderTar reads the decompressed header: header-info first, then
// each payload's headers/NNNN/type-info; other files (scripts, meta-data)
// are skipped.
func readHeaderTar(tr *tar.Reader, name string, version int) (domain.ArtifactMeta, int, error) {
	hdr, err := tr.Next()
	if err != nil {
		return domain.ArtifactMeta{}, 0, decompressError(err, name)
	}
	if hdr.Name != "header-info" {
		return domain.ArtifactMeta{}, 0, formatErrorf("%s: the first entry is %q, not header-info", name, hdr.Name)
	}
	meta, payloads, err := readHeaderInfo(tr, version)
	if err != nil {
		return domain.ArtifactMeta{}, 0, err
	}
	typeInfos := make([]*typeInfo, len(payloads))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return domain.ArtifactMeta{}, 0, decompressError(err, name)
		}
		idx, ok := typeInfoIndex(hdr.Name)
		if !ok {
			continue
		}
		if idx >= len(payloads) {
			return domain.ArtifactMeta{}, 0, formatErrorf("%s: header-info declares %d payload(s)", hdr.Name, len(payloads))
		}
		if typeInfos[idx] != nil {
			return domain.ArtifactMeta{}, 0, formatErrorf("%s: appears twice", hdr.Name)
		}
		var ti typeInfo
		if err := readJSON(tr, hdr.Name, &ti); err != nil {
			return domain.ArtifactMeta{}, 0, err
		}
		typeInfos[idx] = &ti
	}

	provides := map[string]string{}
	for i, ti := range typeInfos {
		if ti == nil {
			if version == 3 {
				return domain.ArtifactMeta{}, 0, formatErrorf("headers/%04d/type-info: missing", i)
			}
			continue
		}
		if ti.Type == nil && version == 3 {
			return domain.ArtifactMeta{}, 0, formatErrorf("headers/%04d/type-info: missing type", i)
		}
		if payloads[i] == "" && ti.Type != nil {
			// mender-artifact 3.x leaves header-info's type empty for
			// rootfs-image in some versions and names it here, or the
			// reverse; either one names the payload.
			payloads[i] = *ti.Type
		}
		for k, v := range ti.ArtifactProvides {
			provides[k] = v
		}
	}
	if payloads[0] == "" {
		return domain.ArtifactMeta{}, 0, formatErrorf("header-info: the payload has no type")
	}
	meta.PayloadType = payloads[0]
	if meta.Provides == nil && len(provides) > 0 {
		meta.Provides = map[string]string{}
	}
	for k, v := range provides {
		meta.Provides[k] = v
	}
	meta.Version = softwareVersion(meta.Provides)
	return meta, len(payloads), nil
}

// readHeaderInfo reads header-info in the artifact's format version and
// returns the metadata it holds and its payload types, in order.
func readHeaderInfo(r io.Reader, version int) (domain.ArtifactMeta, []string, error) {
	var (
		meta     domain.ArtifactMeta
		payloads []string
	)
	if version == 2 {
		var hi headerInfoV2
		if err := readJSON(r, "header-info", &hi); err != nil {
			return meta, nil, err
		}
		meta.ArtifactName, meta.DeviceTypes = hi.ArtifactName, hi.DeviceTypesCompatible
		for _, u := range hi.Updates {
			payloads = append(payloads, u.Type)
		}
	} else {
		var hi headerInfoV3
		if err := readJSON(r, "header-info", &hi); err != nil {
			return meta, nil, err
		}
		meta.ArtifactName, meta.DeviceTypes = hi.ArtifactProvides.ArtifactName, hi.ArtifactDepends.DeviceType
		for _, p := range hi.Payloads {
			payloads = append(payloads, p.Type)
		}
		if hi.ArtifactProvides.ArtifactGroup != "" {
			meta.Provides = map[string]string{"artifact_group": hi.ArtifactProvides.ArtifactGroup}
		}
	}
	switch {
	case strings.TrimSpace(meta.ArtifactName) == "":
		return meta, nil, formatErrorf("header-info: missing artifact_name")
	case len(meta.DeviceTypes) == 0:
		if version == 2 {
			return meta, nil, formatErrorf("header-info: missing device_types_compatible")
		}
		return meta, nil, formatErrorf("header-info: missing artifact_depends.device_type")
	case len(payloads) == 0:
		return meta, nil, formatErrorf("header-info: no payloads")
	case len(payloads) > maxPayloads:
		return meta, nil, formatErrorf("header-info: %d payloads, more than %d", len(payloads), maxPayloads)
	}
	for _, dt := range meta.DeviceTypes {
		if strings.TrimSpace(dt) == "" {
			return meta, nil, formatErrorf("header-info: an empty device type")
		}
	}
	return meta, payloads, nil
}

// typeInfoIndex is N of "headers/NNNN/type-info".
func typeInfoIndex(name string) (int, bool) {
	dir, file := path.Split(name)
	if file != "type-info" || !strings.HasPrefix(dir, "headers/") {
		return 0, false
	}
	num := strings.TrimSuffix(strings.TrimPrefix(dir, "headers/"), "/")
	if len(num) != 4 {
		return 0, false
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// softwareVersion is the version a Mender device will report once it runs
// the artifact: rootfs-image.version, else the one
// rootfs-image.<name>.version mender-artifact writes for
// --software-name or a module image's --software-version. Several of the
// latter say nothing definite: no version.
func softwareVersion(provides map[string]string) string {
	if v, ok := provides["rootfs-image.version"]; ok {
		return v
	}
	var keys []string
	for k := range provides {
		if strings.HasPrefix(k, "rootfs-image.") && strings.HasSuffix(k, ".version") {
			keys = append(keys, k)
		}
	}
	if len(keys) != 1 {
		return ""
	}
	return provides[keys[0]]
}

// readManifest reads the manifest: lines of "<sha256 hex>  <name>".
func readManifest(r io.Reader) (map[string]string, error) {
	b, err := readAllBounded(r, maxEntryBytes, "manifest")
	if err != nil {
		return nil, tarError(err, "manifest")
	}
	sums := map[string]string{}
	for i, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		if !ok || len(sum) != 64 || name == "" {
			return nil, formatErrorf("manifest: line %d is not \"<sha256>  <name>\"", i+1)
		}
		if _, err := hex.DecodeString(sum); err != nil {
			return nil, formatErrorf("manifest: line %d is not \"<sha256>  <name>\"", i+1)
		}
		sums[name] = strings.ToLower(sum)
	}
	return sums, nil
}

// checkManifestSum reads the rest of the compressed header entry through
// sum and compares it with the manifest's line for it, if there is one.
func checkManifestSum(name string, manifest map[string]string, compressed io.Reader, sum hash.Hash) error {
	want, ok := manifest[name]
	if !ok {
		return nil
	}
	if _, err := io.Copy(io.Discard, compressed); err != nil {
		return tarError(err, name)
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != want {
		return formatErrorf("%s: its sha256 does not match the manifest's", name)
	}
	return nil
}

// readJSON decodes one bounded JSON document named what.
func readJSON(r io.Reader, what string, v any) error {
	b, err := readAllBounded(r, maxEntryBytes, what)
	if err != nil {
		return tarError(err, what)
	}
	if err := json.Unmarshal(b, v); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field != "" {
			return formatErrorf("%s: %s: a JSON %s where %s belongs", what, typeErr.Field, typeErr.Value, jsonKind(typeErr.Type.Kind().String()))
		}
		return formatErrorf("%s: not valid JSON (%v)", what, err)
	}
	return nil
}

// jsonKind names a Go kind as JSON calls it.
func jsonKind(k string) string {
	switch k {
	case "slice", "array":
		return "an array"
	case "map", "struct":
		return "an object"
	case "int", "int64", "float64":
		return "a number"
	}
	return "a " + k
}

// tarError turns a failure reading the outer archive at where into a
// reason; a format error passes as it is.
func tarError(err error, where string) error {
	if r := readFailure(err, where); r != nil {
		return r
	}
	if errors.Is(err, tar.ErrHeader) {
		return formatErrorf("not a tar archive (reading %s)", where)
	}
	return formatErrorf("%s: %v", where, err)
}

// decompressError turns a failure reading the header entry name into a
// reason.
func decompressError(err error, name string) error {
	if r := readFailure(err, name); r != nil {
		return r
	}
	switch {
	case errors.Is(err, gzip.ErrHeader):
		return formatErrorf("%s: not gzip data", name)
	case errors.Is(err, gzip.ErrChecksum):
		return formatErrorf("%s: corrupt (its gzip checksum does not match)", name)
	case errors.Is(err, tar.ErrHeader):
		return formatErrorf("%s: not a tar archive inside", name)
	}
	return formatErrorf("%s: corrupt (%v)", name, err)
}
