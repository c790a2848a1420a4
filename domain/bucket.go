package domain

import (
	"crypto/sha256"
	"encoding/binary"
	"strings"
)

// Bucket places a device in one of 100 buckets for a rollout: the first 8
// bytes of SHA-256(rolloutID + ":" + deviceID), big-endian, modulo 100. It
// depends on nothing that changes, so widening a rollout keeps every device
// it admitted before, and every replica computes the same answer.
func Bucket(rolloutID, deviceID string) int {
	h := sha256.Sum256([]byte(strings.ToLower(rolloutID) + ":" + deviceID))
	return int(binary.BigEndian.Uint64(h[:8]) % 100)
}
