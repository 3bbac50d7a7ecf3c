#!/usr/bin/env bash
# The end-to-end environment: a hub and three spokes (each a test hub of scripts/hub.sh:
# a real kube-apiserver + etcd + kube-controller-manager), upstream OCM's placement
# controller on the hub and one upstream work agent per spoke (open-cluster-management.io/ocm
# at bench/peer's version, built from the Go module by bench/peer/build.sh and cached). The e2e tests
# register the clusters (`mwrs_e2e::Env`: ManagedClusters cluster1..cluster3, the
# ManagedClusterSet, namespaces) and start our controller themselves.
#
#   e2e/env.sh up      start (or reuse) everything; stdout: the env file only, to source
#   e2e/env.sh down    stop everything this state dir started
#   e2e/env.sh status  exit 0 when everything of this state dir runs
#
# The env file exports MWRS_E2E_DIR, MWRS_E2E_HUB_KUBECONFIG, MWRS_E2E_CLUSTERS
# (cluster=spoke-kubeconfig,…) and MWRS_E2E_AGENT_PIDS (cluster=pid-file,…).
#
# Environment:
#   MWRS_E2E_DIR         state dir (default /tmp/mwrs-e2e)
#   MWRS_E2E_SYNC        agents' --status-sync-interval (default 1s; upstream's is 10–19 s)
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR=${MWRS_E2E_DIR:-/tmp/mwrs-e2e}
[[ $DIR == /* ]] || DIR=$PWD/$DIR
SYNC=${MWRS_E2E_SYNC:-1s}
CLUSTERS=(cluster1 cluster2 cluster3)

log() { echo "e2e/env.sh: $*" >&2; }
die() {
  log "$*"
  exit 1
}

# The directory of a module of bench/peer's graph.
module_dir() {
  (cd "$REPO_ROOT/bench/peer" && go list -m -f '{{.Dir}}' "$1")
}

# A free loopback port (released before the process binds it: a race is possible but
# unlikely on loopback). Upstream's binaries listen on 0.0.0.0:8443 unless told.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# Starts `$@` in the background unless the pid file names a live process.
start() {
  local name=$1
  shift
  if alive "$DIR/$name.pid"; then
    return 0
  fi
  "$@" </dev/null >"$DIR/$name.log" 2>&1 &
  echo $! >"$DIR/$name.pid"
  log "started $name (pid $!), log: $DIR/$name.log"
}

stop() {
  local f=$1
  if alive "$f"; then
    kill "$(cat "$f")" 2>/dev/null || true
  fi
  rm -f "$f"
}

hub_up() {
  local name=$1 extra=$2
  MWRS_HUB_DIR=$DIR/$name MWRS_HUB_EXTRA_CRDS=$extra "$REPO_ROOT/scripts/hub.sh" up
}

cmd_up() {
  mkdir -p "$DIR"
  local work placement ocm api hub_kc c spoke_kc clusters="" pids=""
  work=$("$REPO_ROOT/bench/peer/build.sh" work)
  placement=$("$REPO_ROOT/bench/peer/build.sh" placement)
  ocm=$(module_dir open-cluster-management.io/ocm)
  api=$(cd / && go mod download -json open-cluster-management.io/api@v1.3.0 | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
  hub_kc=$(hub_up hub "$api/cluster/v1alpha1/0000_05_clusters.open-cluster-management.io_addonplacementscores.crd.yaml")
  start placement "$placement" controller --kubeconfig "$hub_kc" --disable-leader-election \
    --listen "127.0.0.1:$(free_port)"
  for c in "${CLUSTERS[@]}"; do
    spoke_kc=$(hub_up "spoke-$c" "$ocm/manifests/klusterlet/managed/0000_01_work.open-cluster-management.io_appliedmanifestworks.crd.yaml")
    start "agent-$c" "$work" agent --spoke-cluster-name "$c" \
      --hub-kubeconfig "$hub_kc" --kubeconfig "$spoke_kc" --spoke-kubeconfig "$spoke_kc" \
      --workload-source-driver kube --workload-source-config "$hub_kc" \
      --agent-id "$c" --namespace open-cluster-management-agent \
      --status-sync-interval "$SYNC" --disable-leader-election --listen "127.0.0.1:$(free_port)"
    clusters+="${clusters:+,}$c=$spoke_kc"
    pids+="${pids:+,}$c=$DIR/agent-$c.pid"
  done
  cat >"$DIR/env" <<EOF
export MWRS_E2E_DIR=$DIR
export MWRS_E2E_HUB_KUBECONFIG=$hub_kc
export MWRS_E2E_CLUSTERS=$clusters
export MWRS_E2E_AGENT_PIDS=$pids
EOF
  echo "$DIR/env"
}

cmd_down() {
  local f name
  for f in "$DIR"/*.pid; do
    [ -e "$f" ] && stop "$f"
  done
  for name in hub "${CLUSTERS[@]/#/spoke-}"; do
    [ -d "$DIR/$name" ] && MWRS_HUB_DIR=$DIR/$name "$REPO_ROOT/scripts/hub.sh" down || true
  done
}

cmd_status() {
  local name
  [ -f "$DIR/env" ] || return 1
  alive "$DIR/placement.pid" || return 1
  for name in "${CLUSTERS[@]}"; do
    alive "$DIR/agent-$name.pid" || return 1
  done
  for name in hub "${CLUSTERS[@]/#/spoke-}"; do
    MWRS_HUB_DIR=$DIR/$name "$REPO_ROOT/scripts/hub.sh" status >/dev/null 2>&1 || return 1
  done
}

case ${1:-} in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  *) die "usage: e2e/env.sh up|down|status" ;;
esac
