#!/usr/bin/env bash
# Prepares a Debian bookworm machine with no image registry to build and run plaita's image and
# compose stack (docs/operations.md "Containers on a machine without a registry"). It is what
# .ci/run calls before the stack suites; on a machine with a normal Docker installation it has
# nothing to do. Run as root. Idempotent: a second run only checks, in a few seconds.
#
#   1. installs docker.io and debootstrap from Debian's packages when dockerd is missing;
#   2. starts dockerd in the background when no daemon answers;
#   3. makes LOCAL STAND-INS for the registry images the Dockerfile, docker-compose.yml and the
#      code node's docker backend name, when an image of that name is missing:
#        debian:bookworm-slim   debootstrap --variant=minbase bookworm, with this machine's CA
#                               bundle (a machine whose TLS goes through a local authority needs
#                               it for `go mod download` and apt in a container)
#        golang:1.26-bookworm   that + this machine's Go toolchain (go env GOROOT)
#        redis:7-alpine         that + Debian's redis-server, started as the official image
#                               starts it (--protected-mode no when no config file is given)
#        python:3.12-slim       that + Debian's python3 (3.11)   — PLAITA_SANDBOX_DOCKER_IMAGE
#        node:20-alpine         that + Debian's nodejs (18)      — PLAITA_SANDBOX_DOCKER_NODE_IMAGE
#      They stand in for the registry's images because no registry is reachable here: they
#      carry the same names so that the project's files stay those a normal installation uses,
#      the label org.plaita.stand-in=true, and they are never made over a real image;
#   4. builds Docker Compose v2 from the Go module proxy when `docker compose` is missing
#      (Debian's docker-compose is v1, which lacks the compose file's top-level `name:`).
#
# Environment: PLAITA_DOCKER_WORK (default /var/cache/plaita-docker) keeps the debootstrap tree;
# PLAITA_COMPOSE_VERSION (default v5.6.0) is the Compose module's version.
set -euo pipefail

work="${PLAITA_DOCKER_WORK:-/var/cache/plaita-docker}"
compose_version="${PLAITA_COMPOSE_VERSION:-v5.6.0}"
export PATH="/usr/local/go/bin:$PATH"

say() { printf 'local-docker: %s\n' "$*"; }
die() { printf 'local-docker: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root: it installs packages and starts dockerd"

apt_install() {
  # Another apt (an unattended upgrade, a second script) may hold the lock: wait for it.
  apt-get -o DPkg::Lock::Timeout=600 update -qq
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "$@" >/dev/null
}

# ---- 1. packages ----
need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
if [ ${#need[@]} -gt 0 ]; then
  say "installing ${need[*]} from Debian's packages"
  apt_install "${need[@]}"
fi

# ---- 2. the daemon ----
if ! docker info >/dev/null 2>&1; then
  say "starting dockerd (log: /var/log/plaita-dockerd.log)"
  setsid nohup dockerd >/var/log/plaita-dockerd.log 2>&1 </dev/null &
  for _ in $(seq 1 300); do docker info >/dev/null 2>&1 && break; sleep 0.1; done
  docker info >/dev/null 2>&1 || { tail -n 30 /var/log/plaita-dockerd.log >&2; die "dockerd did not answer within 30 s"; }
fi

# ---- 4 (started first: it is the longest and needs only the CPU). Compose v2 ----
compose_pid=""
compose_log="$(mktemp)"
# A docker client without the plugin may say "unknown command" and still exit 0: ask for the
# version itself.
have_compose() { docker compose version --short 2>/dev/null | grep -Eq '^v?[0-9]+\.'; }
if ! have_compose; then
  say "building Docker Compose $compose_version from the Go module proxy (in the background)"
  (
    set -euo pipefail
    dir="$(go mod download -json "github.com/docker/compose/v5@$compose_version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
    [ -n "$dir" ] || { echo "go mod download gave no directory for compose $compose_version"; exit 1; }
    src="$(mktemp -d)"
    cp -r "$dir/." "$src"
    chmod -R u+w "$src"
    # Built inside its own module: its go.mod has exclude directives, which `go install m@v`
    # refuses.
    cd "$src"
    mkdir -p /usr/local/lib/docker/cli-plugins
    CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath \
      -ldflags "-s -w -X github.com/docker/compose/v5/internal.Version=$compose_version" \
      -o /usr/local/lib/docker/cli-plugins/docker-compose.new ./cmd
    mv /usr/local/lib/docker/cli-plugins/docker-compose.new /usr/local/lib/docker/cli-plugins/docker-compose
    cd /
    rm -rf "$src"
  ) >"$compose_log" 2>&1 &
  compose_pid=$!
fi

# ---- 3. the stand-in images ----
has_image() { docker image inspect "$1" >/dev/null 2>&1; }
label=org.plaita.stand-in=true

# classic_build NAME DIR: docker build without BuildKit (no buildx here), its output shown only
# when it fails.
classic_build() {
  local out
  if ! out="$(DOCKER_BUILDKIT=0 docker build --label "$label" -t "$1" "$2" 2>&1)"; then
    printf '%s\n' "$out" | tail -n 30 >&2
    die "building the stand-in $1 failed"
  fi
}

# build_on_base NAME DOCKERFILE-TEXT [FILE…]: builds a stand-in from the bookworm base, with the
# files its COPY lines name in the build context.
build_on_base() {
  local name="$1" dockerfile="$2" ctx
  shift 2
  ctx="$(mktemp -d)"
  printf '%s\n' "$dockerfile" >"$ctx/Dockerfile"
  [ $# -eq 0 ] || cp "$@" "$ctx/"
  say "making $name (stand-in)"
  classic_build "$name" "$ctx"
  rm -rf "$ctx"
}

mkdir -p "$work"
if ! has_image debian:bookworm-slim; then
  root="$work/bookworm"
  if [ ! -x "$root/bin/sh" ] || [ ! -f "$root/.complete" ]; then
    say "debootstrap --variant=minbase bookworm (Debian's mirror as apt uses it)"
    rm -rf "$root"
    mirror="$(sed -n 's/^URIs: *\(http[^ ]*debian\)$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n 1)"
    debootstrap --variant=minbase bookworm "$root" "${mirror:-http://deb.debian.org/debian}" >"$work/debootstrap.log" 2>&1 ||
      { tail -n 20 "$work/debootstrap.log" >&2; die "debootstrap failed (log: $work/debootstrap.log)"; }
    touch "$root/.complete"
  fi
  # Slim as the registry's -slim image: no apt lists or caches, documentation, manuals or
  # translations, and dpkg told to leave them out of what is installed later.
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
    "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/locale/* "$root"/usr/share/info/*
  mkdir -p "$root/etc/dpkg/dpkg.cfg.d"
  printf '%s\n' 'path-exclude /usr/share/doc/*' 'path-include /usr/share/doc/*/copyright' \
    'path-exclude /usr/share/man/*' 'path-exclude /usr/share/info/*' 'path-exclude /usr/share/locale/*' \
    'path-exclude /usr/share/lintian/*' >"$root/etc/dpkg/dpkg.cfg.d/docker"
  printf '%s\n' 'DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/*.bin || true"; };' \
    'APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/*.bin || true"; };' \
    'Dir::Cache::pkgcache ""; Dir::Cache::srcpkgcache "";' >"$root/etc/apt/apt.conf.d/docker-clean"
  # apt sources as on this machine (bookworm, -updates, -security); the CA bundle and the
  # locally added authorities, so that TLS inside a container trusts what the host trusts.
  [ -f /etc/apt/sources.list.d/debian.sources ] && cp /etc/apt/sources.list.d/debian.sources "$root/etc/apt/sources.list.d/" && rm -f "$root/etc/apt/sources.list"
  mkdir -p "$root/etc/ssl/certs" "$root/usr/local/share/ca-certificates"
  cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
  cp -r /usr/local/share/ca-certificates/. "$root/usr/local/share/ca-certificates/" 2>/dev/null || true
  say "importing debian:bookworm-slim (stand-in)"
  tar --exclude=./.complete -C "$root" -c . |
    docker import --change "LABEL $label" --change 'CMD ["bash"]' - debian:bookworm-slim >/dev/null
fi

if ! has_image golang:1.26-bookworm; then
  goroot="$(go env GOROOT)"
  gover="$(go env GOVERSION)"
  say "making golang:1.26-bookworm (stand-in: $gover from $goroot)"
  ctx="$(mktemp -d)"
  cp -r "$goroot" "$ctx/go"
  cat >"$ctx/Dockerfile" <<'EOF'
FROM debian:bookworm-slim
COPY go /usr/local/go
ENV GOPATH=/go PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin GOTOOLCHAIN=local
RUN mkdir -p /go/bin /go/src && chmod -R 1777 /go
WORKDIR /go
EOF
  classic_build golang:1.26-bookworm "$ctx"
  rm -rf "$ctx"
fi

if ! has_image redis:7-alpine; then
  # The official image's entry point, in short: a config file given → as is; otherwise redis
  # listens on every interface of the container without protected mode (the network is the
  # container's), or every client from another container gets "EOF".
  cat >"$work/docker-entrypoint-redis.sh" <<'EOF'
#!/bin/sh
set -e
if [ "${1#-}" != "$1" ]; then set -- redis-server "$@"; fi
if [ "$1" = redis-server ]; then
  # Appended, as the official entry point does: a first argument such as --version stays first.
  case " $* " in *.conf\ *) ;; *) set -- "$@" --protected-mode no ;; esac
fi
exec "$@"
EOF
  chmod +x "$work/docker-entrypoint-redis.sh"
  build_on_base redis:7-alpine "FROM debian:bookworm-slim
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends redis-server \\
 && rm -rf /var/lib/apt/lists/* && mkdir -p /data && chown redis:redis /data
COPY docker-entrypoint-redis.sh /usr/local/bin/docker-entrypoint.sh
USER redis
WORKDIR /data
VOLUME /data
EXPOSE 6379
ENTRYPOINT [\"/usr/local/bin/docker-entrypoint.sh\"]
CMD [\"redis-server\"]" "$work/docker-entrypoint-redis.sh"
fi

if ! has_image python:3.12-slim; then
  build_on_base python:3.12-slim "FROM debian:bookworm-slim
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 \\
 && rm -rf /var/lib/apt/lists/* && ln -s /usr/bin/python3 /usr/local/bin/python
CMD [\"python3\"]"
fi

if ! has_image node:20-alpine; then
  build_on_base node:20-alpine "FROM debian:bookworm-slim
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nodejs \\
 && rm -rf /var/lib/apt/lists/*
CMD [\"node\"]"
fi

if [ -n "$compose_pid" ]; then
  if ! wait "$compose_pid"; then
    cat "$compose_log" >&2
    die "building Docker Compose $compose_version failed"
  fi
fi
rm -f "$compose_log"
have_compose || die "docker compose does not answer after the build"

say "ready: $(docker version --format 'daemon {{.Server.Version}}'), $(docker compose version --short 2>/dev/null | sed 's/^/compose /')"
