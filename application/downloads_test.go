package application_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

type dlStore struct {
	fw  domain.Firmware
	art domain.Artifact
	dev domain.Device
}

func (s dlStore) firmware(_ context.Context, id domain.UUID) (domain.Firmware, error) {
	if id == s.fw.ID() {
		return s.fw, nil
	}
	return domain.Firmware{}, domain.ErrNotFound
}

type dlFirmwares struct{ s *dlStore }

func (f dlFirmwares) Get(ctx context.Context, id domain.UUID) (domain.Firmware, error) {
	return f.s.firmware(ctx, id)
}

type dlArtifacts struct{ s *dlStore }

func (a dlArtifacts) Get(_ context.Context, id domain.UUID) (domain.Artifact, error) {
	if id == a.s.art.ID() {
		return a.s.art, nil
	}
	return domain.Artifact{}, domain.ErrNotFound
}

type dlDevices struct{ s *dlStore }

func (d dlDevices) Get(_ context.Context, id domain.DeviceID) (domain.Device, error) {
	if id == d.s.dev.ID() {
		return d.s.dev, nil
	}
	return domain.Device{}, domain.ErrNotFound
}

// presignBlobs presigns as told and opens what it holds.
type presignBlobs struct {
	presign func() (string, error)
	data    []byte
}

type dlObject struct{ *bytes.Reader }

func (dlObject) Close() error       { return nil }
func (dlObject) ModTime() time.Time { return time.Time{} }

func (b presignBlobs) Put(context.Context, string, io.Reader) (int64, error) { panic("not used") }
func (b presignBlobs) Delete(context.Context, string) error                  { panic("not used") }
func (b presignBlobs) Open(context.Context, string) (ports.BlobObject, error) {
	return dlObject{bytes.NewReader(b.data)}, nil
}
func (b presignBlobs) Presign(context.Context, string, time.Duration) (string, error) {
	return b.presign()
}

type nowClock struct{}

func (nowClock) Now() time.Time { return time.Now() }

// TestDownloadsPresignOrServe: with Presigned, a store that signs sends the
// device to its URL; one that cannot (the file system) is served; any other
// failure of the store is the store's, not a fallback.
func TestDownloadsPresignOrServe(t *testing.T) {
	artID, _ := domain.ParseUUID("id", "7d1e2f30-4a5b-4c6d-8e9f-0a1b2c3d4e5f")
	fwID, _ := domain.ParseUUID("id", "8e2f3041-5b6c-4d7e-9fa0-1b2c3d4e5f60")
	art, err := domain.NewArtifact(artID, "a.bin", domain.ArtifactDigest{Size: 3, SHA256: strings.Repeat("a", 64),
		SHA1: strings.Repeat("b", 40), MD5: strings.Repeat("c", 32)}, domain.ArtifactMeta{}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := domain.FirmwareSpec{Model: "m1", Version: "1.0.0"}.WithArtifact(art)
	fw, err := domain.NewFirmware(fwID, spec, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s := &dlStore{fw: fw, art: art, dev: domain.RehydrateDevice("d1", "m1", domain.Version{}, domain.HashToken("x"), time.Time{}, time.Time{})}
	key, _ := domain.NewLinkKey([]byte(strings.Repeat("p", 32)))
	open := func(presign func() (string, error)) (ports.Download, error) {
		dl, err := application.NewDownloads(application.DownloadPorts{Firmwares: dlFirmwares{s}, Devices: dlDevices{s}, Artifacts: dlArtifacts{s},
			Blobs: presignBlobs{presign: presign, data: []byte("abc")}, Clock: nowClock{}}, application.DownloadConfig{LinkKey: key, Presigned: true})
		if err != nil {
			t.Fatal(err)
		}
		return dl.Open(context.Background(), s.dev, fwID)
	}
	if d, err := open(func() (string, error) { return "https://s3.example/a?sig", nil }); err != nil || d.Redirect != "https://s3.example/a?sig" || d.Object != nil {
		t.Errorf("a store that signs: %+v %v", d, err)
	}
	if d, err := open(func() (string, error) { return "", ports.ErrPresignUnsupported }); err != nil || d.Redirect != "" || d.Object == nil {
		t.Errorf("a store that cannot sign: %+v %v, want the bytes served", d, err)
	}
	if _, err := open(func() (string, error) { return "", domain.ErrServiceBusy }); !errors.Is(err, domain.ErrServiceBusy) {
		t.Errorf("a failing store: %v, want ErrServiceBusy", err)
	}
}
