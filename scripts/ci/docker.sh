#!/usr/bin/env bash
# CI: a Docker engine from Debian packages and the base images the docker tests need,
# made from Debian packages (nothing is pulled from an image registry). Idempotent:
# installs only what is missing, starts dockerd only when none answers, builds an
# image only when it is absent (the debootstrap tree is cached as a tarball).
#   bash scripts/ci/docker.sh          install, start, build images
#   bash scripts/ci/docker.sh stop     remove posttrain containers, stop the dockerd we started
set -euo pipefail
CACHE=${POSTTRAIN_DOCKER_CACHE:-/var/cache/posttrain-docker}
BASE=${POSTTRAIN_DOCKER_BASE:-posttrain/bookworm:latest}
PIDFILE=$CACHE/dockerd.pid
mkdir -p "$CACHE"

stop() {
  ids=$(docker ps -aq --filter label=posttrain.sandbox 2>/dev/null || true)
  [ -z "$ids" ] || docker rm -f $ids >/dev/null 2>&1 || true
  ids=$(podman ps -aq --filter label=posttrain.sandbox 2>/dev/null || true)
  [ -z "$ids" ] || podman rm -f $ids >/dev/null 2>&1 || true
  for kind in network volume; do     # what multi-container tasks left (compose projects)
    ids=$(docker $kind ls -q --filter label=posttrain.sandbox 2>/dev/null || true)
    [ -z "$ids" ] || docker $kind rm $ids >/dev/null 2>&1 || true
  done
  if [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
    kill "$(cat "$PIDFILE")"
    for _ in $(seq 50); do kill -0 "$(cat "$PIDFILE")" 2>/dev/null || break; sleep 0.2; done
    rm -f "$PIDFILE"
    echo "docker.sh: dockerd stopped"
  fi
}
[ "${1:-}" = stop ] && { stop; exit 0; }

# The Debian archive this system's apt uses (its first deb URI), never a hard-coded host.
debian_mirror() {
  cat /etc/apt/sources.list.d/*.sources 2>/dev/null | sed -n 's/^URIs: *\([^ ]*debian\)\/*$/\1/p' | head -1 \
    | grep . || sed -n 's/^deb \(\[[^]]*\] \)\{0,1\}\([^ ]*\) .*/\2/p' /etc/apt/sources.list 2>/dev/null | head -1
}

# docker-compose: Debian bookworm's 1.29 (the compose v2 plugin is not packaged for bookworm
# and cannot be downloaded here); it drives the sidecars of multi-container tasks.
if ! command -v dockerd >/dev/null || ! command -v debootstrap >/dev/null \
    || ! command -v docker-compose >/dev/null || ! command -v podman >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq docker.io debootstrap docker-compose >/dev/null
  # Podman (4.3) behind the same backend, tested by tests/sandbox/docker/test_podman.py.
  apt-get install -y -qq --no-install-recommends podman catatonit >/dev/null
fi

if ! docker version >/dev/null 2>&1; then
  # dockerd from the Debian package (20.10); its log goes to the cache dir.
  # its own fds only: a lock (flock) or pipe the caller holds must not live on in the daemon
  (for fd in /proc/self/fd/*; do n=${fd##*/}; [ "$n" -gt 2 ] && eval "exec $n>&-"; done
   exec /usr/sbin/dockerd >"$CACHE/dockerd.log" 2>&1 </dev/null) &
  echo $! >"$PIDFILE"
  for _ in $(seq 100); do docker version >/dev/null 2>&1 && break; sleep 0.2; done
  docker version >/dev/null 2>&1 || { tail -20 "$CACHE/dockerd.log"; exit 1; }
fi

if ! docker image inspect "$BASE" >/dev/null 2>&1; then
  tarball=$CACHE/bookworm-minbase.tar
  if [ ! -s "$tarball" ]; then
    tree=$(mktemp -d)
    debootstrap --variant=minbase --include=python3,python3-pip,python3-venv,ca-certificates,procps \
      bookworm "$tree" "$(debian_mirror)" >"$CACHE/debootstrap.log" 2>&1 \
      || { tail -20 "$CACHE/debootstrap.log"; exit 1; }
    rm -rf "$tree"/var/cache/apt/archives/*.deb "$tree"/var/lib/apt/lists/*
    tar -C "$tree" -cf "$tarball" .
    rm -rf "$tree"
  fi
  docker import -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    -c 'CMD ["bash"]' "$tarball" "$BASE" >/dev/null
fi
if ! podman image exists "$BASE" 2>/dev/null; then      # the same base image for Podman
  if [ -s "$CACHE/bookworm-minbase.tar" ]; then
    podman import -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      -c 'CMD ["bash"]' "$CACHE/bookworm-minbase.tar" "$BASE" >/dev/null
  else
    docker save "$BASE" | podman load -q >/dev/null
  fi
fi
echo "docker.sh: engine $(docker version --format '{{.Server.Version}}'), base image $BASE," \
  "$(docker-compose version --short 2>/dev/null | sed 's/^/compose /'),"\
  "$(podman version --format '{{.Client.Version}}' 2>/dev/null | sed 's/^/podman /')"
