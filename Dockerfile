# The agentassistant container image: docker build -t agentassistant .
# A static server on an empty base, run as a user that is not root, its
# data in the /data volume. Listening beyond the container needs a token:
#   docker run -p 127.0.0.1:22080:22080 -v agentassistant:/data agentassistant -token "$TOKEN"
# (or agentassistant_server_token in /data/agentassistant-srv.toml).
# make image builds the same image without Docker.

FROM node:22-bookworm AS web
WORKDIR /src/web
COPY web/package.json web/package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY web/ ./
COPY srv/webui/dist/.gitkeep /src/srv/webui/dist/.gitkeep
RUN npm run build

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
COPY --from=web /src/srv/webui/dist/ ./srv/webui/dist/
# The licences of what the binaries hold, served at /notices
# (internal/notices; it reads the packages the UI build bundled).
COPY --from=web /src/web/node_modules/ ./web/node_modules/
RUN go run ./internal/notices
ARG VERSION=dev
ARG COMMIT=
ARG DATE=
RUN CGO_ENABLED=0 go build -trimpath -o /out/ \
      -ldflags "-s -w -X github.com/agentassistant/agentassistant/internal/buildinfo.version=${VERSION} -X github.com/agentassistant/agentassistant/internal/buildinfo.commit=${COMMIT} -X github.com/agentassistant/agentassistant/internal/buildinfo.date=${DATE}" \
      ./cmd/agentassistant-srv ./cmd/agentassistant-mcp \
 && mkdir -p /out/data \
 && printf 'root:x:0:0:root:/root:/sbin/nologin\nagentassistant:x:65532:65532:agentassistant:/data:/sbin/nologin\n' > /out/passwd \
 && printf 'root:x:0:\nagentassistant:x:65532:\n' > /out/group

FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/passwd /etc/passwd
COPY --from=build /out/group /etc/group
COPY --from=build --chown=65532:65532 --chmod=0700 /out/data /data
COPY --from=build /out/agentassistant-srv /out/agentassistant-mcp /usr/local/bin/
USER 65532:65532
WORKDIR /data
ENV HOME=/data
VOLUME /data
EXPOSE 22080
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["/usr/local/bin/agentassistant-srv", "health"]
ENTRYPOINT ["/usr/local/bin/agentassistant-srv", "-host", "0.0.0.0", "-data", "/data"]
