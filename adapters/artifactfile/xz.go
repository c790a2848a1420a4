package artifactfile

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"

	"github.com/ulikunitz/xz/lzma"
)

// mender-artifact's "lzma" compression writes the header as an xz stream
// (header.tar.xz). xz's own reader allocates the dictionary each block's
// header declares, up to 4 GiB, before decoding a byte; so the container
// is read here and only its LZMA2 data handed to the decoder, with a
// dictionary no larger than the decompressed header may be
// (maxHeaderBytes): a match can never reach further back than the output
// so far, so the smaller dictionary decodes every header that fits the
// bound, and a hostile declaration costs nothing.
//
// The header is read from the first block only, which is where an xz
// writer puts a file this small (mender-artifact writes one block, xz
// starts a new one every few MiB); a tar that goes on past it reads as
// truncated. The block's integrity check is not verified: the manifest's
// sha256 covers the whole compressed header.

// xzMagic opens every xz stream.
var xzMagic = []byte{0xFD, '7', 'z', 'X', 'Z', 0x00}

// lzma2FilterID is the only filter accepted (no BCJ or delta filters:
// mender-artifact uses none).
const lzma2FilterID = 0x21

// openXZ reads an xz stream's header and its first block's header from r
// and returns the block's decompressed data.
func openXZ(r io.Reader, name string) (io.Reader, error) {
	br := bufio.NewReader(r)
	var sh [12]byte
	if _, err := io.ReadFull(br, sh[:]); err != nil {
		return nil, decompressError(err, name)
	}
	if !bytes.Equal(sh[:6], xzMagic) {
		return nil, formatErrorf("%s: not xz data", name)
	}
	if crc32.ChecksumIEEE(sh[6:8]) != binary.LittleEndian.Uint32(sh[8:12]) {
		return nil, formatErrorf("%s: corrupt (the xz stream header's checksum does not match)", name)
	}
	first, err := br.ReadByte()
	if err != nil {
		return nil, decompressError(err, name)
	}
	if first == 0 {
		return nil, formatErrorf("%s: an xz stream without data", name)
	}
	bh := make([]byte, (int(first)+1)*4)
	bh[0] = first
	if _, err := io.ReadFull(br, bh[1:]); err != nil {
		return nil, decompressError(err, name)
	}
	n := len(bh)
	if crc32.ChecksumIEEE(bh[:n-4]) != binary.LittleEndian.Uint32(bh[n-4:]) {
		return nil, formatErrorf("%s: corrupt (the xz block header's checksum does not match)", name)
	}
	dict, err := lzma2Dict(bh[1 : n-4])
	if err != nil {
		return nil, formatErrorf("%s: %v", name, err)
	}
	dictCap := min(dict, maxHeaderBytes)
	dictCap = max(dictCap, lzma.MinDictCap)
	lr, err := lzma.Reader2Config{DictCap: int(dictCap)}.NewReader2(br)
	if err != nil {
		return nil, formatErrorf("%s: corrupt (%v)", name, err)
	}
	return lr, nil
}

// lzma2Dict reads a block header's body (after its size byte, before its
// CRC): the flags, the optional sizes, and exactly one filter, LZMA2,
// whose one property byte encodes the dictionary size.
func lzma2Dict(b []byte) (int64, error) {
	bad := func() (int64, error) { return 0, reasonError("a corrupt xz block header") }
	if len(b) < 1 {
		return bad()
	}
	flags, rest := b[0], b[1:]
	if flags&0x3C != 0 {
		return bad()
	}
	if flags&0x03 != 0 {
		return 0, reasonError("xz filters other than LZMA2 alone are not supported")
	}
	var ok bool
	for _, present := range []bool{flags&0x40 != 0, flags&0x80 != 0} {
		if present {
			if _, rest, ok = uvarint(rest); !ok {
				return bad()
			}
		}
	}
	id, rest, ok := uvarint(rest)
	if !ok {
		return bad()
	}
	if id != lzma2FilterID {
		return 0, reasonError("xz filters other than LZMA2 alone are not supported")
	}
	size, rest, ok := uvarint(rest)
	if !ok || size != 1 || len(rest) < 1 {
		return bad()
	}
	props := rest[0]
	for _, pad := range rest[1:] {
		if pad != 0 {
			return bad()
		}
	}
	switch {
	case props > 40:
		return bad()
	case props == 40:
		return 1<<32 - 1, nil
	}
	return int64(2|props&1) << (props/2 + 11), nil
}

// uvarint reads xz's multibyte integer (at most 9 bytes).
func uvarint(b []byte) (uint64, []byte, bool) {
	var v uint64
	for i := 0; i < len(b) && i < 9; i++ {
		v |= uint64(b[i]&0x7F) << (7 * i)
		if b[i]&0x80 == 0 {
			if i > 0 && b[i] == 0 {
				return 0, nil, false // not the shortest encoding
			}
			return v, b[i+1:], true
		}
	}
	return 0, nil, false
}

// reasonError is a reason that openXZ prefixes with the entry's name.
type reasonError string

func (e reasonError) Error() string { return string(e) }
