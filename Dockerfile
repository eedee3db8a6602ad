# plaita: one static binary, every role. Build: docker build -t plaita .
# The image runs the console by default; pass a role to run another (`plaita worker --concurrency 4`).
#
# The console listens where PLAITA_CONSOLE_HOST / PLAITA_CONSOLE_PORT say: the image hard-codes
# no host. The default host is 127.0.0.1, which is unreachable from outside a container, so a
# deployment sets PLAITA_CONSOLE_HOST=0.0.0.0 on purpose (docker-compose.yml does).

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/plaita . \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/plaita /usr/local/bin/plaita
# /data holds the console's SQLite database; owned by the non-root user so a volume mounted
# there starts writable.
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
WORKDIR /data
ENV PLAITA_CONSOLE_DB_URL=sqlite:////data/plaita_console.db
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/plaita"]
CMD ["console"]
