#!/usr/bin/env bash
# Test hub for the integration tests: a real kube-apiserver + embedded etcd +
# kube-controller-manager (garbage collector, namespace controller) on 127.0.0.1,
# with the OCM CRDs (open-cluster-management.io/api) and deploy/crds/*.yaml installed.
# Built from Go modules only (testhub/); needs nothing but Go.
#
#   scripts/hub.sh up       build (cached) + start in the background, wait until ready.
#                           stdout: the kubeconfig path only; progress goes to stderr.
#   scripts/hub.sh down     stop the hub started from this state dir
#   scripts/hub.sh env      print `export KUBECONFIG=...` lines:  eval "$(scripts/hub.sh env)"
#   scripts/hub.sh status   exit 0 if running and healthy
#   scripts/hub.sh crash-restart  SIGKILL the hub (API server and etcd at once, as a crash)
#                           and start it again on its data, port and credentials (the
#                           fault soak's hub restart); prints the kubeconfig path
#   scripts/hub.sh kubectl  build (cached) upstream's kubectl of the hub's version; prints
#                           its path (the getting-started walkthrough's script needs a kubectl)
#   scripts/hub.sh build    build (cached) the hub without starting it; prints its path
#
# Environment:
#   MWRS_HUB_DIR       state dir (default /tmp/mwrs-hub): hub.pid, hub.log, kubeconfig, data/
#   MWRS_HUB_TIMEOUT   seconds to wait for readiness (default 300)
#   MWRS_HUB_EXTRA_CRDS  more CRD files to install, colon-separated (e2e: AppliedManifestWork
#                      on a spoke, AddOnPlacementScore for the placement controller)
#   MWRS_HUB_K8S       Kubernetes version of the hub and of `kubectl` (default v1.36.3,
#                      testhub/go.mod's). Another one, e.g. v1.27.16 for the chart's oldest
#                      supported release (scripts/compat.sh), builds a copy of testhub/
#                      generated under ${XDG_CACHE_HOME:-$HOME/.cache}/mwrs-testhub-src/<version>/
#                      whose go.mod pins k8s.io/kubernetes at it, its staging modules at the
#                      matching v0.X.Y and the etcd server its go.mod names (cold: ~15 min)
#   MWRS_HUB_ARGS      more testhub flags, space-separated (bench/soak/run.sh: an audit log,
#                      --apiserver-arg=--audit-log-path=... --apiserver-arg=--audit-policy-file=...)
#   XDG_CACHE_HOME     binary cache: ${XDG_CACHE_HOME:-$HOME/.cache}/mwrs-testhub/<hash>/testhub
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HUB_SRC=$REPO_ROOT/testhub
STATE_DIR=${MWRS_HUB_DIR:-/tmp/mwrs-hub}
[[ $STATE_DIR == /* ]] || STATE_DIR=$PWD/$STATE_DIR
READY_TIMEOUT=${MWRS_HUB_TIMEOUT:-300}
CACHE_ROOT=${XDG_CACHE_HOME:-$HOME/.cache}/mwrs-testhub
OCM_API_MODULE=open-cluster-management.io/api@v1.3.0
DEFAULT_K8S_VERSION=v1.36.3 # testhub/go.mod's
K8S_VERSION=${MWRS_HUB_K8S:-$DEFAULT_K8S_VERSION}
if [[ ! $K8S_VERSION =~ ^v1\.([0-9]+)\.[0-9]+$ ]]; then
  echo "hub.sh: MWRS_HUB_K8S=$K8S_VERSION: want a release version like v1.27.16" >&2
  exit 2
fi
K8S_MINOR=${BASH_REMATCH[1]}
# Generated copies of testhub/ for MWRS_HUB_K8S (outside CACHE_ROOT: its pruning keeps builds).
COMPAT_SRC_ROOT=${XDG_CACHE_HOME:-$HOME/.cache}/mwrs-testhub-src
BUILD_TAGS="" # set by use_k8s_version for a generated copy

PID_FILE=$STATE_DIR/hub.pid
LOG_FILE=$STATE_DIR/hub.log
READY_FILE=$STATE_DIR/ready
KUBECONFIG_FILE=$STATE_DIR/kubeconfig
FINGERPRINT_FILE=$STATE_DIR/fingerprint
BIN_RECORD=$STATE_DIR/binary

LDFLAGS="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  LDFLAGS+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$K8S_MINOR -X $pkg.gitTreeState=clean"
done

if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
  PATH=$PATH:/usr/local/go/bin
fi

log() { echo "hub.sh: $*" >&2; }
die() { log "$*"; exit 1; }

# Microseconds since the epoch (bash 5 has EPOCHREALTIME).
now_us() {
  if [ -n "${EPOCHREALTIME:-}" ]; then
    local t=${EPOCHREALTIME/[.,]/}
    echo $((10#$t))
  else
    echo $(($(date +%s%N) / 1000))
  fi
}
fmt_secs() { echo "$(($1 / 1000000)).$((($1 / 100000) % 10))s"; }

# A live (non-zombie) process?
alive() {
  local pid=$1 state=""
  kill -0 "$pid" 2>/dev/null || return 1
  if [ -r "/proc/$pid/stat" ]; then
    read -r _ _ state _ <"/proc/$pid/stat" || true
    [ "$state" != Z ] || return 1
  fi
  return 0
}

# Prints the pid of the hub of this state dir if it is running.
running_pid() {
  [ -f "$PID_FILE" ] || return 1
  local pid
  pid=$(cat "$PID_FILE" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  alive "$pid" || return 1
  if [ -r "/proc/$pid/cmdline" ]; then # guard against pid reuse
    tr '\0' '\n' <"/proc/$pid/cmdline" | grep -qxF -- "$STATE_DIR/data" || return 1
  fi
  echo "$pid"
}

healthy() {
  [ -f "$READY_FILE" ] && [ -f "$KUBECONFIG_FILE" ] && [ -f "$BIN_RECORD" ] || return 1
  local bin
  bin=$(cat "$BIN_RECORD")
  [ -x "$bin" ] && "$bin" healthcheck --kubeconfig "$KUBECONFIG_FILE" >/dev/null 2>&1
}

# Builds the hub binary unless a build of the same sources is cached; prints its path.
ensure_binary() {
  use_k8s_version
  build_cached testhub . "a cold build takes 10-25 min on 2 cores"
}

# Builds upstream's kubectl at the hub's Kubernetes version from the same module (its
# packages are kept in it by tools.go), cached like the hub; prints its path.
ensure_kubectl() {
  use_k8s_version
  build_cached kubectl k8s.io/kubernetes/cmd/kubectl "1-3 min once the hub is built"
}

# build_cached NAME PACKAGE HINT: builds PACKAGE of testhub/ into the cache directory of
# its sources' hash unless already there; prints the binary's path.
build_cached() {
  local name=$1 pkg=$2 hint=$3 hash dir bin
  hash=$(
    cd "$HUB_SRC"
    {
      go version
      echo "$LDFLAGS"
      [ -z "$BUILD_TAGS" ] || echo "tags $BUILD_TAGS"
      for f in go.mod go.sum $(LC_ALL=C ls -- *.go); do
        echo "== $f"
        cat -- "$f"
      done
    } | sha256sum | cut -c1-16
  )
  dir=$CACHE_ROOT/$hash
  bin=$dir/$name
  if [ -x "$bin" ]; then
    echo "$bin"
    return 0
  fi
  mkdir -p "$dir"
  log "building $name into $dir ($hint)"
  local t0 tmp
  t0=$(now_us)
  tmp=$bin.tmp.$$
  if ! (cd "$HUB_SRC" && CGO_ENABLED=0 go build -buildvcs=false ${BUILD_TAGS:+-tags "$BUILD_TAGS"} -ldflags "$LDFLAGS" -o "$tmp" "$pkg") >&2; then
    rm -f "$tmp"
    die "build failed"
  fi
  mv -f "$tmp" "$bin"
  log "built in $(fmt_secs $(($(now_us) - t0)))"
  # Keep the cache small: drop all but the three newest builds.
  local old
  for old in $(ls -1td -- "$CACHE_ROOT"/*/ 2>/dev/null | tail -n +4); do
    rm -rf -- "$old"
  done
  echo "$bin"
}

# For MWRS_HUB_K8S other than the default: points HUB_SRC at the generated copy of
# testhub/ for that version (generating it first if testhub/*.go or the recipe below
# changed) and sets BUILD_TAGS.
use_k8s_version() {
  [ "$K8S_VERSION" != "$DEFAULT_K8S_VERSION" ] || return 0
  local dir=$COMPAT_SRC_ROOT/$K8S_VERSION stamp
  stamp=$(
    cd "$HUB_SRC"
    {
      echo "$K8S_VERSION"
      go version
      declare -f generate_src
      for f in $(LC_ALL=C ls -- *.go); do
        echo "== $f"
        cat -- "$f"
      done
    } | sha256sum | cut -c1-16
  )
  if [ "$(cat "$dir/.stamp" 2>/dev/null)" != "$stamp" ]; then
    local tmp=$dir.tmp.$$
    rm -rf -- "$tmp"
    mkdir -p "$tmp"
    if ! generate_src "$tmp" >&2; then
      rm -rf -- "$tmp"
      die "could not generate the testhub sources for Kubernetes $K8S_VERSION"
    fi
    echo "$stamp" >"$tmp/.stamp"
    rm -rf -- "$dir"
    mv -- "$tmp" "$dir"
  fi
  HUB_SRC=$dir
  BUILD_TAGS=$(cat "$dir/.build-tags")
}

# generate_src DIR: testhub/*.go plus a go.mod derived from k8s.io/kubernetes@K8S_VERSION's
# own go.mod: its staging modules (the ./staging/src replaces) at v0.X.Y, its etcd server
# (or, if it names none, its etcd client's version), its go directive and godebug lines;
# `go mod tidy` resolves the rest from there.
generate_src() {
  local dir=$1 mod staging etcd go_line
  log "generating testhub sources for Kubernetes $K8S_VERSION in ${dir%.tmp.*}"
  mod=$(cd / && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" |
    sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')
  [ -n "$mod" ] && [ -f "$mod" ] || { log "could not download k8s.io/kubernetes@$K8S_VERSION"; return 1; }
  staging=v0.${K8S_VERSION#v1.}
  etcd=$(awk '$1 == "go.etcd.io/etcd/server/v3" { print $2; exit }' "$mod")
  [ -n "$etcd" ] || etcd=$(awk '$1 == "go.etcd.io/etcd/client/v3" { print $2; exit }' "$mod")
  [ -n "$etcd" ] || { log "no go.etcd.io/etcd version in $mod"; return 1; }
  go_line=$(grep -m1 -E '^go [0-9.]+$' "$mod") || { log "no go directive in $mod"; return 1; }
  cp -- "$HUB_SRC"/*.go "$dir"/
  {
    echo "// Generated by scripts/hub.sh for MWRS_HUB_K8S=$K8S_VERSION from testhub/ and the"
    echo "// go.mod of k8s.io/kubernetes $K8S_VERSION. Do not edit; never commit."
    echo "module github.com/mwrs-rs/testhub"
    echo
    echo "$go_line"
    grep -E '^godebug [^(]' "$mod" || true
    echo
    echo "require ("
    echo "	go.etcd.io/etcd/server/v3 $etcd"
    echo "	k8s.io/kubernetes $K8S_VERSION"
    echo ")"
    echo
    echo "replace ("
    sed -n "s#^[[:space:]]*\(k8s\.io/[^[:space:]]*\) => \./staging/src/k8s\.io/.*#	\1 => \1 $staging#p" "$mod"
    echo ")"
  } >"$dir/go.mod"
  grep -q "k8s.io/client-go => k8s.io/client-go $staging" "$dir/go.mod" ||
    { log "no staging replaces in $mod"; return 1; }
  log "k8s.io/kubernetes $K8S_VERSION, staging modules $staging, etcd server $etcd; go mod tidy"
  (cd "$dir" && go mod tidy) || return 1
  # etcd v3.5.x up to its fields' renaming (e.g. v3.5.7): testhub/etcd_urls_legacy.go.
  local etcd_dir
  etcd_dir=$(cd "$dir" && go list -f '{{.Dir}}' go.etcd.io/etcd/server/v3/embed) || return 1
  if grep -qE '^[[:space:]]+ListenClientUrls[[:space:]]' "$etcd_dir/config.go"; then
    : >"$dir/.build-tags"
  else
    echo etcd_legacy_urls >"$dir/.build-tags"
  fi
}

# Fills CRD_ARGS: upstream OCM CRDs first, then the repo's deploy/crds/*.yaml (ours win).
crd_args() {
  local api_dir
  api_dir=$(cd / && go mod download -json "$OCM_API_MODULE" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
  [ -n "$api_dir" ] && [ -d "$api_dir" ] || die "could not download $OCM_API_MODULE"
  CRD_ARGS=()
  local f
  for f in \
    cluster/v1/0000_00_clusters.open-cluster-management.io_managedclusters.crd.yaml \
    cluster/v1beta2/0000_00_clusters.open-cluster-management.io_managedclustersets.crd.yaml \
    cluster/v1beta2/0000_01_clusters.open-cluster-management.io_managedclustersetbindings.crd.yaml \
    cluster/v1beta1/0000_02_clusters.open-cluster-management.io_placements.crd.yaml \
    cluster/v1beta1/0000_03_clusters.open-cluster-management.io_placementdecisions.crd.yaml \
    work/v1/0000_00_work.open-cluster-management.io_manifestworks.crd.yaml \
    work/v1alpha1/0000_00_work.open-cluster-management.io_manifestworkreplicasets.crd.yaml; do
    [ -f "$api_dir/$f" ] || die "missing $f in $OCM_API_MODULE"
    CRD_ARGS+=(--crd "$api_dir/$f")
  done
  local extra=()
  IFS=: read -r -a extra <<<"${MWRS_HUB_EXTRA_CRDS:-}"
  for f in "${extra[@]}"; do
    [ -n "$f" ] || continue
    [ -f "$f" ] || die "MWRS_HUB_EXTRA_CRDS: no file $f"
    CRD_ARGS+=(--crd "$f")
  done
  if [ -d "$REPO_ROOT/deploy/crds" ]; then
    for f in "$REPO_ROOT"/deploy/crds/*.yaml; do
      [ -f "$f" ] && CRD_ARGS+=(--crd "$f")
    done
  fi
  return 0
}

print_log_tail() {
  if [ -f "$LOG_FILE" ]; then
    log "last lines of $LOG_FILE:"
    tail -n 60 "$LOG_FILE" >&2
  fi
}

cmd_up() {
  mkdir -p "$STATE_DIR"
  local bin fp pid
  bin=$(ensure_binary)
  crd_args
  local hub_args=()
  read -r -a hub_args <<<"${MWRS_HUB_ARGS:-}"
  fp=$(
    {
      echo "$bin"
      printf '%s\n' "${hub_args[@]}"
      printf '%s\n' "${CRD_ARGS[@]}"
      for f in "${CRD_ARGS[@]}"; do [ -f "$f" ] && cat -- "$f"; done
    } | sha256sum | cut -c1-16
  )

  if pid=$(running_pid); then
    if [ "$(cat "$FINGERPRINT_FILE" 2>/dev/null)" = "$fp" ]; then
      if healthy; then
        log "test hub already running and healthy (pid $pid); reusing it"
        echo "$KUBECONFIG_FILE"
        return 0
      fi
      if [ ! -f "$READY_FILE" ]; then
        log "test hub (pid $pid) is still starting; waiting for it"
        wait_ready "$pid" "$(now_us)" || exit 1
        return 0
      fi
      log "test hub (pid $pid) is unhealthy; restarting it"
    else
      log "test hub (pid $pid) runs another build or other CRDs; restarting it"
    fi
    cmd_down
  fi

  echo "$fp" >"$FINGERPRINT_FILE"
  echo "$bin" >"$BIN_RECORD"
  local attempt rc
  for attempt in 1 2 3; do
    rm -f "$READY_FILE" "$KUBECONFIG_FILE" "$PID_FILE"
    [ -f "$LOG_FILE" ] && mv -f "$LOG_FILE" "$LOG_FILE.1"
    local t0
    t0=$(now_us)
    "$bin" --detach --dir "$STATE_DIR/data" --kubeconfig "$KUBECONFIG_FILE" \
      --ready-file "$READY_FILE" "${hub_args[@]}" ${HUB_RESUME:+--resume} "${CRD_ARGS[@]}" </dev/null >>"$LOG_FILE" 2>&1 &
    pid=$!
    echo "$pid" >"$PID_FILE"
    log "started test hub (pid $pid), log: $LOG_FILE"
    rc=0
    wait_ready "$pid" "$t0" || rc=$?
    [ "$rc" -eq 0 ] && return 0
    # The hub picks free ports itself; another process may grab one first.
    if [ "$rc" -eq 1 ] && [ "$attempt" -lt 3 ] && grep -q 'address already in use' "$LOG_FILE"; then
      log "port collision; retrying"
      continue
    fi
    exit 1
  done
}

# Waits for the ready file. Returns 1 if the hub died, 2 on timeout (hub stopped).
wait_ready() {
  local pid=$1 t0=$2 deadline
  deadline=$((t0 + READY_TIMEOUT * 1000000))
  while [ ! -f "$READY_FILE" ]; do
    if ! alive "$pid"; then
      print_log_tail
      rm -f "$PID_FILE"
      log "test hub exited before becoming ready"
      return 1
    fi
    if [ "$(now_us)" -ge "$deadline" ]; then
      print_log_tail
      cmd_down >&2 || true
      log "test hub not ready within ${READY_TIMEOUT}s"
      return 2
    fi
    sleep 0.2
  done
  log "test hub ready (pid $pid); kubeconfig: $KUBECONFIG_FILE"
  log "time to ready: $(fmt_secs $(($(now_us) - t0)))"
  echo "$KUBECONFIG_FILE"
}

cmd_down() {
  local pid
  if ! pid=$(running_pid); then
    log "test hub not running"
    rm -f "$PID_FILE" "$READY_FILE"
    return 0
  fi
  log "stopping test hub (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  local deadline=$(($(now_us) + 60 * 1000000))
  while alive "$pid" && [ "$(now_us)" -lt "$deadline" ]; do
    sleep 0.1
  done
  if alive "$pid"; then
    log "test hub did not stop within 60s; killing it"
    # --detach made the hub a session/group leader: its group holds only it and its children.
    kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
  fi
  # The controller-manager child dies with its parent (stdin EOF + parent-death signal);
  # make sure nothing of the group is left either way.
  kill -KILL -- "-$pid" 2>/dev/null || true
  rm -f "$PID_FILE" "$READY_FILE" "$KUBECONFIG_FILE"
  log "test hub stopped"
}

cmd_crash_restart() {
  local pid
  pid=$(running_pid) || die "test hub not running"
  kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
  while alive "$pid"; do
    sleep 0.1
  done
  rm -f "$PID_FILE" "$READY_FILE"
  log "test hub (pid $pid) killed; starting it again on its state"
  HUB_RESUME=1 cmd_up
}

cmd_env() {
  if ! running_pid >/dev/null || [ ! -f "$KUBECONFIG_FILE" ]; then
    die "test hub not running (start it with: scripts/hub.sh up)"
  fi
  printf 'export KUBECONFIG=%q\n' "$KUBECONFIG_FILE"
  printf 'export MWRS_TEST_KUBECONFIG=%q\n' "$KUBECONFIG_FILE"
}

cmd_status() {
  local pid
  if pid=$(running_pid); then
    if healthy; then
      echo "running (pid $pid), kubeconfig: $KUBECONFIG_FILE"
      return 0
    fi
    echo "process $pid is up but the hub is not ready/healthy (log: $LOG_FILE)"
    return 1
  fi
  echo "not running"
  return 1
}

case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down ;;
  env) cmd_env ;;
  status) cmd_status ;;
  crash-restart) cmd_crash_restart ;;
  kubectl) ensure_kubectl ;;
  build) ensure_binary ;;
  *)
    echo "usage: $0 up|down|env|status|crash-restart|kubectl|build" >&2
    exit 2
    ;;
esac
