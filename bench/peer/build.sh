#!/usr/bin/env bash
# Builds one of upstream OCM's commands from the Go module proxy: `work` (default; its
# `manager` subcommand is the hub work controller with the ManifestWorkReplicaSet
# controller, our benchmark peer; its `agent` subcommand is the work agent of e2e/env.sh),
# `placement` (its `controller` subcommand, for e2e/env.sh) or `registration-operator` (its
# `hub` subcommand is the cluster-manager operator, run by the operator-coexistence test).
# Nothing of upstream is vendored: go.mod only lists the commands as `tool`s.
#
#   bench/peer/build.sh [work|registration-operator|placement]
#                            stdout: the binary path only; progress goes to stderr.
#
# The binary is cached under ${XDG_CACHE_HOME:-$HOME/.cache}/mwrs-peer/<hash>/<command>,
# keyed by the Go version, the link flags, go.mod and go.sum, so a second call returns at
# once.
# Environment:
#   MWRS_PEER_BUILD_TRIES   attempts at fetching modules (default 3; the proxy's checksum
#                           database lookup has answered a transient 404 here once)
set -euo pipefail

PEER_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE_ROOT=${XDG_CACHE_HOME:-$HOME/.cache}/mwrs-peer
COMMAND=${1:-work}
case $COMMAND in
  work | registration-operator | placement) ;;
  *)
    echo "peer/build.sh: unknown command '$COMMAND' (work, registration-operator or placement)" >&2
    exit 2
    ;;
esac
PKG=open-cluster-management.io/ocm/cmd/$COMMAND
TRIES=${MWRS_PEER_BUILD_TRIES:-3}

if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
  PATH=$PATH:/usr/local/go/bin
fi

log() { echo "peer/build.sh: $*" >&2; }
die() {
  log "$*"
  exit 1
}

command -v go >/dev/null 2>&1 || die "no go command on PATH (Go >= 1.25 is needed)"

# The version upstream's module is pinned at, read from go.mod so that the stamp cannot
# drift from what is actually built.
OCM_VERSION=$(awk '$1 == "open-cluster-management.io/ocm" { print $2; exit }' "$PEER_SRC/go.mod")
[[ $OCM_VERSION =~ ^v([0-9]+)\.([0-9]+)\. ]] || die "cannot read the open-cluster-management.io/ocm version from $PEER_SRC/go.mod"
OCM_MAJOR=${BASH_REMATCH[1]}
OCM_MINOR=${BASH_REMATCH[2]}

# Upstream's Makefile stamps these; without them `work --version` says <unknown> and the
# build_info metric is empty.
VPKG=open-cluster-management.io/ocm/pkg/version
LDFLAGS="-s -w -X $VPKG.versionFromGit=$OCM_VERSION -X $VPKG.majorFromGit=$OCM_MAJOR -X $VPKG.minorFromGit=$OCM_MINOR -X $VPKG.commitFromGit=module-proxy"

now_s() { date +%s; }

hash=$(
  cd "$PEER_SRC"
  {
    go version
    echo "$LDFLAGS"
    for f in go.mod go.sum; do
      echo "== $f"
      cat -- "$f"
    done
  } | sha256sum | cut -c1-16
)
dir=$CACHE_ROOT/$hash
bin=$dir/$COMMAND
if [ -x "$bin" ]; then
  log "cached: $bin"
  echo "$bin"
  exit 0
fi

mkdir -p "$dir"
log "building $PKG@$OCM_VERSION into $dir (cold: ~30 s module download + ~9 min compile on 2 idle cores, ~17 min on busy ones)"
t0=$(now_s)

# Fetch exactly the modules the package graph needs, with retries: a network or proxy
# hiccup should not cost a whole CI run, while a compile error (below) fails at once.
attempt=1
while :; do
  errf=$(mktemp)
  if (cd "$PEER_SRC" && go list -deps "$PKG" >/dev/null 2>"$errf"); then
    rm -f "$errf"
    break
  fi
  cat "$errf" >&2
  rm -f "$errf"
  [ "$attempt" -lt "$TRIES" ] || die "could not fetch the modules for $PKG after $TRIES attempts (see above)"
  log "module fetch failed (attempt $attempt of $TRIES); retrying in 5s"
  attempt=$((attempt + 1))
  sleep 5
done
log "modules ready after $(($(now_s) - t0))s; compiling"

tmp=$bin.tmp.$$
if ! (cd "$PEER_SRC" && CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "$LDFLAGS" -o "$tmp" "$PKG") >&2; then
  rm -f "$tmp"
  die "go build $PKG failed"
fi
mv -f "$tmp" "$bin"
log "built in $(($(now_s) - t0))s: $bin ($(du -h "$bin" | cut -f1))"

# Keep the cache small: drop all but the three newest builds (each holds both commands).
for old in $(ls -1td -- "$CACHE_ROOT"/*/ 2>/dev/null | tail -n +4); do
  rm -rf -- "$old"
done
echo "$bin"
