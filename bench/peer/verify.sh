#!/usr/bin/env bash
# End-to-end check that the peer (upstream OCM's hub work manager, bench/peer/run.sh) really
# runs the ManifestWorkReplicaSet controller against our test hub:
#   1. starts a private test hub (scripts/hub.sh, its own MWRS_HUB_DIR), unless KUBECONFIG
#      is given as $1;
#   2. creates namespace peer-verify-<time>, N cluster namespaces, a Placement and a
#      PlacementDecision (labels and status as upstream's placement controller writes them);
#   3. creates an MWRS (work.open-cluster-management.io/v1alpha1, rollout strategy All);
#   4. starts the peer and checks: one ManifestWork per cluster, with upstream's labels;
#      status.summary.total == N; a template change reaches every ManifestWork; /healthz
#      answers; deleting the MWRS deletes its ManifestWorks (upstream's finalizer);
#   5. stops the peer and the hub it started.
# Exit 0 only if every check passed. Needs kubectl (in the machine image) and Go.
#
#   bench/peer/verify.sh [KUBECONFIG]
# Environment: PEER_VERIFY_CLUSTERS (default 3), PEER_VERIFY_TIMEOUT seconds per wait (60),
#   PEER_VERIFY_PEER_ARGS extra flags for run.sh (e.g. --feature-gates=ManifestWorkReplicaSet=false
#   must make this script fail: that is how to see that it can).
set -euo pipefail

PEER_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$PEER_SRC/../.." && pwd)
N=${PEER_VERIFY_CLUSTERS:-3}
TIMEOUT=${PEER_VERIFY_TIMEOUT:-60}
# A fresh name per run, so that a given hub can be verified against more than once
# (the test hub has no namespace controller to finish deleting old namespaces).
RUN_ID=$(date +%s)
NS=peer-verify-$RUN_ID
WORKDIR=$(mktemp -d)
PEER_PID=""
HUB_DIR=""

log() { echo "peer/verify.sh: $*" >&2; }
fail() {
  log "FAIL: $*"
  if [ -f "$WORKDIR/peer.log" ]; then
    log "last lines of the peer's log:"
    tail -n 40 "$WORKDIR/peer.log" >&2
  fi
  exit 1
}

cleanup() {
  if [ -n "$PEER_PID" ] && kill -0 "$PEER_PID" 2>/dev/null; then
    kill -TERM "$PEER_PID" 2>/dev/null || true
    wait "$PEER_PID" 2>/dev/null || true
  fi
  if [ -n "$HUB_DIR" ]; then
    MWRS_HUB_DIR=$HUB_DIR "$REPO_ROOT/scripts/hub.sh" down >&2 || true
    rm -rf -- "$HUB_DIR"
  fi
  [ -n "${PEER_VERIFY_KEEP:-}" ] && log "kept $WORKDIR" || rm -rf -- "$WORKDIR"
}
trap cleanup EXIT

command -v kubectl >/dev/null 2>&1 || fail "kubectl not found"

# Polls CMD (a shell snippet) until it succeeds or TIMEOUT seconds pass.
wait_until() {
  local what=$1 cmd=$2 deadline=$((SECONDS + TIMEOUT))
  until eval "$cmd"; do
    [ "$SECONDS" -lt "$deadline" ] || fail "timed out after ${TIMEOUT}s waiting for: $what"
    sleep 0.5
  done
  log "ok: $what"
}

if [ $# -ge 1 ]; then
  export KUBECONFIG=$1
else
  HUB_DIR=$(mktemp -d)
  export KUBECONFIG
  KUBECONFIG=$(MWRS_HUB_DIR=$HUB_DIR "$REPO_ROOT/scripts/hub.sh" up)
fi
kc() { kubectl --request-timeout=20s "$@"; }

bin=$("$PEER_SRC/build.sh")
log "peer binary: $bin ($("$bin" --version))"

clusters=()
for i in $(seq 1 "$N"); do clusters+=("$NS-c$i"); done

kc create namespace "$NS" >/dev/null
for c in "${clusters[@]}"; do kc create namespace "$c" >/dev/null; done

kc apply -f - >/dev/null <<EOF
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata: {name: pl, namespace: $NS}
spec: {}
---
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: PlacementDecision
metadata:
  name: pl-decision-1
  namespace: $NS
  labels:
    cluster.open-cluster-management.io/placement: pl
    cluster.open-cluster-management.io/decision-group-index: "0"
    cluster.open-cluster-management.io/decision-group-name: ""
EOF
decisions=$(printf '{"clusterName":"%s","reason":""},' "${clusters[@]}")
kc -n "$NS" patch placementdecision pl-decision-1 --subresource=status --type=merge \
  -p "{\"status\":{\"decisions\":[${decisions%,}]}}" >/dev/null

mwrs() {
  kc apply -f - >/dev/null <<EOF
apiVersion: work.open-cluster-management.io/v1alpha1
kind: ManifestWorkReplicaSet
metadata: {name: mwrs1, namespace: $NS}
spec:
  placementRefs:
  - name: pl
    rolloutStrategy: {type: All}
  manifestWorkTemplate:
    workload:
      manifests:
      - apiVersion: v1
        kind: ConfigMap
        metadata: {name: peer-verify, namespace: default}
        data: {value: "$1"}
EOF
}
mwrs v1

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
MWRS_PEER_BIN=$bin MWRS_PEER_LISTEN=127.0.0.1:$port "$PEER_SRC/run.sh" "$KUBECONFIG" ${PEER_VERIFY_PEER_ARGS:-} >"$WORKDIR/peer.log" 2>&1 &
PEER_PID=$!
log "peer started (pid $PEER_PID, metrics/healthz on 127.0.0.1:$port)"

sel=work.open-cluster-management.io/manifestworkreplicaset=$NS.mwrs1
count_works() { kc get manifestworks -A -l "$sel" --no-headers 2>/dev/null | wc -l; }
wait_until "$N ManifestWorks labelled $sel" '[ "$(count_works)" -eq "$N" ]'

for c in "${clusters[@]}"; do
  pl=$(kc -n "$c" get manifestwork mwrs1 -o jsonpath='{.metadata.labels.work\.open-cluster-management\.io/placementname}') ||
    fail "no ManifestWork mwrs1 in $c"
  [ "$pl" = pl ] || fail "ManifestWork $c/mwrs1 has placementname label '$pl'"
done
log "ok: one ManifestWork per cluster namespace: ${clusters[*]}"

wait_until "MWRS status.summary.total == $N" \
  '[ "$(kc -n "$NS" get manifestworkreplicaset mwrs1 -o jsonpath="{.status.summary.total}")" = "$N" ]'

fin=$(kc -n "$NS" get manifestworkreplicaset mwrs1 -o jsonpath='{.metadata.finalizers}')
[[ $fin == *manifest-work-cleanup* ]] || fail "MWRS has no cleanup finalizer: $fin"

mwrs v2
updated() {
  local c
  for c in "${clusters[@]}"; do
    [ "$(kc -n "$c" get manifestwork mwrs1 -o jsonpath='{.spec.workload.manifests[0].data.value}')" = v2 ] || return 1
  done
}
wait_until "template change (v1 -> v2) reached all $N ManifestWorks" updated

code=$(curl -sk -o /dev/null -w '%{http_code}' "https://127.0.0.1:$port/healthz") || true
[ "$code" = 200 ] || fail "/healthz answered $code"
log "ok: /healthz 200"

kc -n "$NS" delete manifestworkreplicaset mwrs1 --wait=false >/dev/null
wait_until "ManifestWorks deleted with the MWRS" '[ "$(count_works)" -eq 0 ]'
wait_until "MWRS gone (finalizer removed)" \
  '! kc -n "$NS" get manifestworkreplicaset mwrs1 >/dev/null 2>&1'

rss=$(awk '/^VmHWM/ {print $2 " " $3}' "/proc/$PEER_PID/status" 2>/dev/null || echo "?")
log "peer peak RSS so far: $rss"
kill -TERM "$PEER_PID"
wait "$PEER_PID" 2>/dev/null || true
PEER_PID=""
log "PASS: upstream work manager fanned out, updated and cleaned up $N ManifestWorks"
