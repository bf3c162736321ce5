#!/usr/bin/env bash
# Local stand-ins for the base images that docker/Dockerfile and
# docker/docker-compose.yml pin, for machines that cannot pull from a registry
# (CI, the stack test in e2e/docker/stack_test.go). They are test fixtures, not
# what production runs: each is a small root filesystem made from this host's
# own binaries (and the shared libraries ldd names), imported under exactly the
# pinned name, so the Dockerfile and the Compose file are used as they are.
#
#   golang:1.26.8                             this host's Go (/usr/local/go, the
#                                             version go.mod names), busybox, and
#                                             a module mirror: GOPROXY=file:///goproxy
#                                             holds every module go.mod needs, as a
#                                             company mirror would; no network
#   gcr.io/distroless/static-debian12:nonroot passwd/group with nonroot (65532),
#                                             CA certificates, /tmp; no shell
#   redis:7.0.15-alpine                       Debian's redis-server and redis-cli
#                                             (7.0.15 in bookworm) in /usr/local/bin,
#                                             busybox as sh, docker-entrypoint.sh that
#                                             drops root to "redis" as the real one does
#   nginx:1.27.5-alpine                       Debian's nginx (1.22, with auth_request),
#                                             the official image's nginx.conf (includes
#                                             /etc/nginx/conf.d/*.conf), busybox wget
#   prom/prometheus:v2.42.0                   Debian's prometheus (2.42, the version
#                                             pinned) as /bin/prometheus, user nobody,
#                                             /prometheus, busybox wget (the profile
#                                             observability; grafana has no stand-in)
#
# An image is built only when it is missing, except golang's, which is rebuilt
# when the modules it mirrors may change (its label snowtoken.standin.go-sum
# holds the SHA-256 of every go.mod and go.sum the Dockerfile copies: a
# go.mod can require a module whose sums go.sum already had, and the mirror
# must then hold its .mod file too). A real image of the same name, pulled from a registry, is never
# replaced. Needs docker, go, busybox (busybox-static), redis-server,
# redis-cli, nginx, setpriv and prometheus on this host.
# Usage: docker/standin/build.sh [-f | -check] (-f: rebuild every stand-in;
# -check: build nothing, only say which of those is missing, and exit 1 if any)
set -euo pipefail
cd "$(dirname "$0")/../.."

force=false check=false
case "${1:-}" in
-f) force=true ;;
-check) check=true ;;
esac

export PATH="$PATH:/usr/sbin"
missing=()
for bin in docker go busybox redis-server redis-cli nginx setpriv prometheus; do
  command -v "$bin" >/dev/null 2>&1 || missing+=("$bin")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "standin: ${missing[*]} not found on this host (Debian: busybox-static, redis-server, redis-tools, nginx-light, util-linux, prometheus)" >&2
  exit 1
fi
if $check; then
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# needed NAME [LABEL VALUE]: whether image NAME must be (re)built: it is
# missing, or it is a stand-in whose LABEL is not VALUE. A real image of that
# name (pulled, without the label snowtoken.standin) is kept, even with -f.
needed() {
  local name=$1 label=${2:-} want=${3:-} labels
  if ! labels=$(docker image inspect -f '{{json .Config.Labels}}' "$name" 2>/dev/null); then
    return 0
  fi
  if [[ $labels != *'"snowtoken.standin":'* ]]; then
    return 1
  fi
  $force || { [ -n "$label" ] && [[ $labels != *"\"$label\":\"$want\""* ]]; }
}

# binary ROOT SRC DST: copies the executable SRC to ROOT/DST with every
# shared library ldd lists, at the library's own path.
binary() {
  local root=$1 src=$2 dst=$3 lib
  install -D -m 0755 "$(readlink -f "$src")" "$root$dst"
  for lib in $(ldd "$src" | grep -o '/[^ ]*'); do
    [ -e "$root$lib" ] || install -D -m 0755 "$(readlink -f "$lib")" "$root$lib"
  done
}

# add_busybox ROOT: busybox as /bin/busybox and every applet as a link in /bin,
# as Alpine has it (sh, wget, cat, grep, ...).
add_busybox() {
  local root=$1 applet
  install -D -m 0755 "$(command -v busybox)" "$root/bin/busybox"
  for applet in $(busybox --list); do
    [ -e "$root/bin/$applet" ] || ln -s busybox "$root/bin/$applet"
  done
}

# base ROOT: what every stand-in has: /etc/passwd and /etc/group with root
# and nobody (more appended by the caller), /tmp, CA certificates.
base() {
  local root=$1
  mkdir -p "$root/etc/ssl/certs" "$root/tmp" "$root/root"
  chmod 1777 "$root/tmp"
  chmod 0700 "$root/root"
  cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n' >"$root/etc/passwd"
  printf 'root:x:0:\nnobody:x:65534:\n' >"$root/etc/group"
  printf 'hosts: files dns\n' >"$root/etc/nsswitch.conf"
}

# user ROOT NAME UID HOME: adds a user and its group.
user() {
  local root=$1 name=$2 uid=$3 home=$4
  printf '%s:x:%s:%s:%s:%s:/sbin/nologin\n' "$name" "$uid" "$uid" "$name" "$home" >>"$root/etc/passwd"
  printf '%s:x:%s:\n' "$name" "$uid" >>"$root/etc/group"
}

# import ROOT NAME CHANGE...: the root filesystem as image NAME, with the
# Dockerfile instructions CHANGE... (ENV, USER, ENTRYPOINT, ...).
import() {
  local root=$1 name=$2 change args=()
  shift 2
  for change in "$@" "LABEL snowtoken.standin=test-fixture"; do
    args+=(--change "$change")
  done
  tar --numeric-owner -C "$root" -c . | docker import "${args[@]}" - "$name" >/dev/null
  echo "standin: built $name"
}

gosum=$(cat go.mod go.sum client/go.mod client/go.sum bitsalloc/go.mod | sha256sum | cut -d' ' -f1)
if needed golang:1.26.8 snowtoken.standin.go-sum "$gosum"; then
  root=$work/golang
  base "$root"
  add_busybox "$root"
  if [ "$(go env GOVERSION)" != go1.26.8 ]; then
    echo "standin: golang:1.26.8 needs Go 1.26.8 on this host, not $(go env GOVERSION)" >&2
    exit 1
  fi
  mkdir -p "$root/usr/local" "$root/go"
  chmod 0777 "$root/go"
  cp -a "$(go env GOROOT)" "$root/usr/local/go"
  # The mirror: a fresh module cache filled by `go mod download` (the
  # Dockerfile's own step), from this host's cache first.
  GOMODCACHE=$work/modcache GOFLAGS=-modcacherw \
    GOPROXY="file://$(go env GOMODCACHE)/cache/download,$(go env GOPROXY)" go mod download
  cp -a "$work/modcache/cache/download" "$root/goproxy"
  import "$root" golang:1.26.8 \
    "ENV PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    "ENV GOLANG_VERSION=1.26.8" "ENV GOPATH=/go" "ENV GOTOOLCHAIN=local" \
    "ENV GOPROXY=file:///goproxy" \
    "WORKDIR /go" \
    "LABEL snowtoken.standin.go-sum=$gosum"
fi

if needed gcr.io/distroless/static-debian12:nonroot; then
  root=$work/distroless
  base "$root"
  user "$root" nonroot 65532 /home/nonroot
  install -d -m 0700 -o 65532 -g 65532 "$root/home/nonroot"
  import "$root" gcr.io/distroless/static-debian12:nonroot \
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    "ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt" \
    "USER 65532" "WORKDIR /home/nonroot"
fi

if needed redis:7.0.15-alpine; then
  root=$work/redis
  base "$root"
  add_busybox "$root"
  user "$root" redis 999 /home/redis
  binary "$root" "$(command -v redis-server)" /usr/local/bin/redis-server
  binary "$root" "$(command -v redis-cli)" /usr/local/bin/redis-cli
  # su-exec, as Alpine has it: util-linux setpriv, named by its path (busybox's
  # sh would run its own setpriv applet, which cannot change user).
  binary "$root" "$(command -v setpriv)" /usr/bin/setpriv
  cat >"$root/usr/local/bin/su-exec" <<'EOF'
#!/bin/sh
# su-exec USER COMMAND...: COMMAND as USER, without root (stand-in).
user=$1
shift
exec /usr/bin/setpriv --reuid="$user" --regid="$user" --clear-groups "$@"
EOF
  # The official image's entrypoint, less what the stack does not use.
  cat >"$root/usr/local/bin/docker-entrypoint.sh" <<'EOF'
#!/bin/sh
set -e
if [ "${1#-}" != "$1" ] || [ "${1%.conf}" != "$1" ]; then
	set -- redis-server "$@"
fi
if [ "$1" = 'redis-server' ] && [ "$(id -u)" = '0' ]; then
	find . \! -user redis -exec chown redis '{}' +
	exec su-exec redis "$0" "$@"
fi
um="$(umask)"
if [ "$um" = '0022' ]; then
	umask 0077
fi
exec "$@"
EOF
  chmod 0755 "$root/usr/local/bin/su-exec" "$root/usr/local/bin/docker-entrypoint.sh"
  install -d -m 0755 -o 999 -g 999 "$root/data"
  import "$root" redis:7.0.15-alpine \
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    "WORKDIR /data" "VOLUME /data" "EXPOSE 6379" \
    'ENTRYPOINT ["docker-entrypoint.sh"]' 'CMD ["redis-server"]'
fi

if needed nginx:1.27.5-alpine; then
  root=$work/nginx
  base "$root"
  add_busybox "$root"
  user "$root" nginx 101 /var/cache/nginx
  binary "$root" /usr/sbin/nginx /usr/sbin/nginx
  mkdir -p "$root/etc/nginx/conf.d" "$root/var/log/nginx" "$root/var/cache/nginx" "$root/run"
  install -d -m 0755 -o 101 -g 101 "$root/var/lib/nginx"
  cp /etc/nginx/mime.types "$root/etc/nginx/"
  ln -s /dev/stdout "$root/var/log/nginx/access.log"
  ln -s /dev/stderr "$root/var/log/nginx/error.log"
  ln -s /run "$root/var/run"
  # The official image's nginx.conf.
  cat >"$root/etc/nginx/nginx.conf" <<'EOF'
user  nginx;
worker_processes  auto;

error_log  /var/log/nginx/error.log notice;
pid        /var/run/nginx.pid;

events {
    worker_connections  1024;
}

http {
    include       /etc/nginx/mime.types;
    default_type  application/octet-stream;

    log_format  main  '$remote_addr - $remote_user [$time_local] "$request" '
                      '$status $body_bytes_sent "$http_referer" '
                      '"$http_user_agent" "$http_x_forwarded_for"';

    access_log  /var/log/nginx/access.log  main;

    sendfile        on;
    keepalive_timeout  65;

    include /etc/nginx/conf.d/*.conf;
}
EOF
  import "$root" nginx:1.27.5-alpine \
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    "EXPOSE 80" 'CMD ["nginx", "-g", "daemon off;"]'
fi

if needed prom/prometheus:v2.42.0; then
  root=$work/prometheus
  base "$root"
  add_busybox "$root"
  binary "$root" "$(command -v prometheus)" /bin/prometheus
  mkdir -p "$root/etc/prometheus"
  install -d -m 0755 -o 65534 -g 65534 "$root/prometheus"
  import "$root" prom/prometheus:v2.42.0 \
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    "USER nobody" "WORKDIR /prometheus" "VOLUME /prometheus" "EXPOSE 9090" \
    'ENTRYPOINT ["/bin/prometheus"]' \
    'CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"]'
fi
