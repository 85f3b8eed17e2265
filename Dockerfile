# syntax=docker/dockerfile:1
#
# gitlease: a static binary on a small Debian image with a shell, git and CA
# certificates, running as a non-root user.
#
#   docker build --build-arg VERSION=$(git describe --always --dirty) -t gitlease .
#   docker run --rm -e DATABASE_URL=... -e GITHUB_WEBHOOK_SECRET=... -p 8080:8080 gitlease
#
# The entrypoint is the gitlease binary and the default command is `serve`;
# any other command replaces it (`docker run gitlease migrate`, Fly's
# release_command "migrate").

FROM golang:1.26 AS build
WORKDIR /src
# Dependencies first, so they stay cached while only the code changes.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" \
	-o /out/gitlease ./cmd/gitlease

# debian:bookworm-slim, not distroless: GITLEASE_WORKER_EXEC runs through
# `sh -c`, and worker commands need git and CA certificates (SPEC §9), and
# bubblewrap for their sandbox (SPEC §8.2). The server and its commands run
# as the unprivileged user gitlease.
FROM debian:bookworm-slim
RUN apt-get update \
	&& apt-get install -y --no-install-recommends bubblewrap ca-certificates git tzdata \
	&& rm -rf /var/lib/apt/lists/* \
	&& useradd --system --create-home --home-dir /home/gitlease --uid 10001 --user-group gitlease
COPY --from=build /out/gitlease /gitlease
USER gitlease:gitlease
WORKDIR /home/gitlease
EXPOSE 8080
ENTRYPOINT ["/gitlease"]
CMD ["serve"]
