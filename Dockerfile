# syntax=docker/dockerfile:1
#
# otad in a container: a static binary (CGO_ENABLED=0) with its migrations
# embedded, in a distroless image (no shell, no package manager) that runs
# as a non-root user. Build, stamping the version `otad version` reports:
#
#   docker build -t otad \
#     --build-arg VERSION="$(git describe --tags --always --dirty)" \
#     --build-arg COMMIT="$(git rev-parse --short=12 HEAD)" .
#
# Base images are pinned by tag (what it is) and digest (exactly which
# bytes); update both together, e.g. with
# `docker buildx imagetools inspect golang:1.26.8-bookworm`. The Go tag
# matches the go line of go.mod (tests/packaging checks it).

FROM golang:1.26.8-bookworm@sha256:dc9ad6c05acc7a88e5b71bde60a5fe3bd4b9f0db209011711b464107438a8107 AS build
WORKDIR /src
# The toolchain is the image's: never download another one mid-build.
ENV CGO_ENABLED=0 GOTOOLCHAIN=local
# Modules first, in their own layer: a source edit does not re-download them.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" \
      -o /out/otad . \
 && /out/otad version \
 && mkdir -p /out/artifacts

FROM gcr.io/distroless/static-debian12:nonroot@sha256:afa5c872c891853ca7fcf1f12c3edb23f7eeef36189728842dd51042ff57f7ab
COPY --from=build /out/otad /usr/local/bin/otad
# distroless' "nonroot" user (65532), numeric so that runtimes enforcing
# runAsNonRoot can verify it without reading /etc/passwd.
USER 65532:65532
ENV OTA_HTTP_ADDR=:8080
# Uploaded artifacts live in a directory the nonroot user owns (the default
# ./var/artifacts would be under the read-only /): mount a volume there, or
# point OTA_ARTIFACT_STORE at an S3 bucket for several replicas.
COPY --from=build --chown=65532:65532 /out/artifacts /var/lib/ota/artifacts
ENV OTA_ARTIFACT_STORE=file:///var/lib/ota/artifacts
VOLUME ["/var/lib/ota/artifacts"]
EXPOSE 8080
# The image has no curl or wget: the binary probes its own /healthz.
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD ["/usr/local/bin/otad", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/otad"]
CMD ["serve"]
