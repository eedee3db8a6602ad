# plaita: one binary, every role (docs/operations.md "Containers").
#   docker build -t plaita .
#   docker run --rm plaita                      # prints the roles and tools: pick one
#   docker run plaita worker --concurrency 4    # a role
#
# The image has no default role: a container runs the role its command names (docker-compose.yml
# and deploy/k8s/ name one each). The console listens where PLAITA_CONSOLE_HOST /
# PLAITA_CONSOLE_PORT say — no host is hard-coded, and the default 127.0.0.1 is unreachable from
# outside a container, so a deployment sets PLAITA_CONSOLE_HOST=0.0.0.0 on purpose.
#
# deploy/image_test.go checks this file's rules (non-root, health check, python3 and node, no
# default role) with BuildKit's own Dockerfile parser.

# build compiles the static binary (CGO_ENABLED=0).
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/plaita .

FROM debian:bookworm-slim
# python3 and node: the code node's subprocess backend (the worker's default) runs them
# (PLAITA_SANDBOX_NODE_BIN=node). tini is PID 1: it forwards SIGTERM to plaita (whose handler
# drains) and reaps what a killed code node's process leaves behind.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 nodejs tini ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 plaita \
 && useradd --system --uid 10001 --gid plaita --home-dir /data --no-create-home --shell /usr/sbin/nologin plaita \
 && mkdir -p /data/workspace \
 && chown -R 10001:10001 /data
COPY --from=build /out/plaita /usr/local/bin/plaita
COPY deploy/docker-entrypoint.sh /usr/local/bin/plaita-entrypoint
# The demo flows, for the compose stack's seed (plaita flow publish).
COPY examples/*.json /usr/share/plaita/flows/
USER 10001:10001
# /data holds the console's SQLite database and the writefile jail; owned by the non-root user,
# so a volume mounted there starts writable.
WORKDIR /data
# Every role serves /metrics, /healthz and /readyz on 9100: the health check asks /readyz, which
# is not ready while the role starts or drains.
ENV PLAITA_CONSOLE_DB_URL=sqlite:////data/plaita_console.db \
    PLAITA_NODES_WORKSPACE_ROOT=/data/workspace \
    PLAITA_METRICS_HOST=0.0.0.0 \
    PLAITA_METRICS_PORT=9100
EXPOSE 8080 9100
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 CMD ["plaita", "probe", "--quiet"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/plaita-entrypoint"]
CMD ["roles"]
