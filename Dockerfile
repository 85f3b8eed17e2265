# syntax=docker/dockerfile:1
#
# gitlease: a static binary on a minimal, non-root base image.
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

# distroless/static: CA certificates (for api.github.com and TLS to Postgres),
# tzdata and a nonroot user, and nothing else: no shell, no package manager.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/gitlease /gitlease
USER nonroot:nonroot
EXPOSE 8080
ENTRYPOINT ["/gitlease"]
CMD ["serve"]
