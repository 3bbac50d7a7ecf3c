#!/usr/bin/env bash
# The book's walkthrough (docs/src/getting-started.md), step by step: prints every command as a
# user types it, then its output, as the walkthrough shows them. On the test hub:
#
#   scripts/hub.sh up && eval "$(scripts/hub.sh env)" && export KUBECONFIG=$MWRS_TEST_KUBECONFIG
#   cargo build -p mwrs-cli -p mwrs-controller -p mwrs-fleet
#   examples/walkthrough.sh
#
# It starts the controller (for namespace $NAMESPACE only, default `demo`) and a simulated
# fleet of four clusters (`mwrs-fleet`, which registers fake ManagedClusters: never on a
# real hub), applies examples/app-v{1,2,3}.yaml, and removes everything it made at the end.
# Needs kubectl, and mwrs, mwrs-controller and mwrs-fleet in $MWRS_BIN_DIR (default
# target/debug) or on PATH. Every step checks its exit code; any surprise stops the script
# with exit 1. crates/fleet/tests/walkthrough.rs runs it in the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
ns=${NAMESPACE:-demo}
prefix=${CLUSTER_PREFIX:-cluster}
fleet_name=${FLEET_NAME:-walkthrough}
export PATH="${MWRS_BIN_DIR:-$PWD/target/debug}:$PATH"
for b in kubectl mwrs mwrs-controller mwrs-fleet; do
    command -v "$b" >/dev/null || {
        echo "walkthrough.sh: $b not found (cargo build -p mwrs-cli -p mwrs-controller -p mwrs-fleet; kubectl)" >&2
        exit 1
    }
done
work=$(mktemp -d "${TMPDIR:-/tmp}/mwrs-walkthrough.XXXXXX")
fleet=(--name "$fleet_name" --clusters 4 --prefix "$prefix" --namespace "$ns" --placement prod)
hung="$prefix-002"
pids=()
made_namespace=false

cleanup() {
    local rc=$?
    kubectl delete -n "$ns" manifestworkreplicasets.work.open-cluster-management.io app \
        --ignore-not-found --timeout=60s >/dev/null 2>&1 || true
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    mwrs-fleet down --name "$fleet_name" --namespace "$ns" --placement prod >/dev/null 2>&1 || true
    if $made_namespace; then kubectl delete namespace "$ns" --wait=false >/dev/null 2>&1 || true; fi
    if [[ $rc != 0 ]]; then
        echo "walkthrough.sh: failed; the controller's log:" >&2
        tail -n 40 "$work/controller.log" >&2 || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

# step [-x CODE] CMD...: prints the command as typed (mwrs as `kubectl mwrs`), runs it,
# prints "(exit code N)" when it is not 0, and stops unless it is CODE (default 0).
step() {
    local want=0 rc=0
    if [[ $1 == -x ]]; then want=$2; shift 2; fi
    local shown=("$@")
    if [[ $1 == mwrs ]]; then shown=(kubectl mwrs "${@:2}"); fi
    printf '$ %s\n' "${shown[*]}"
    "$@" || rc=$?
    if [[ $rc != 0 ]]; then echo "(exit code $rc)"; fi
    echo
    if [[ $rc != "$want" ]]; then
        echo "walkthrough.sh: \`${shown[*]}\` exited $rc, expected $want" >&2
        exit 1
    fi
}

# until_status TEXT: waits (60 s at most) until `rollout status app -o json`, without
# spaces, contains TEXT.
until_status() {
    local deadline=$((SECONDS + 60))
    until mwrs -n "$ns" rollout status app -o json 2>/dev/null | tr -d ' \n' | grep -qF "$1"; do
        if ((SECONDS >= deadline)); then
            echo "walkthrough.sh: timed out waiting for $1 in rollout status" >&2
            exit 1
        fi
        sleep 0.2
    done
}

# agent [RULE...]: (re)starts the fleet's work agent, every ManifestWork done after 1.5 s
# unless a rule says otherwise.
agent() {
    if ((${#pids[@]} > 1)); then kill "${pids[1]}" && wait "${pids[1]}" 2>/dev/null || true; fi
    local rules=()
    for r in "$@"; do rules+=(--behave "$r"); done
    mwrs-fleet agent "${fleet[@]}" --latency 1500ms "${rules[@]}" >>"$work/fleet.log" 2>&1 &
    pids[1]=$!
}

if ! kubectl get namespace "$ns" >/dev/null 2>&1; then
    kubectl create namespace "$ns" >/dev/null
    made_namespace=true
fi
mwrs-controller --namespace "$ns" --metrics-addr 127.0.0.1:0 >"$work/controller.log" 2>&1 &
pids[0]=$!
mwrs-fleet up "${fleet[@]}" >"$work/fleet.log" 2>&1
echo "# the fleet: mwrs-fleet run ${fleet[*]} --latency 1500ms --behave 'cluster=$hung,manifest=\"v3\"=hang'"
echo
agent "cluster=$hung,manifest=\"v3\"=hang"

step kubectl apply -n "$ns" -f "examples/app-v1.yaml"
step mwrs -n "$ns" rollout status app -w --timeout 60s
step mwrs -n "$ns" get

echo "# The template moves to v2; two clusters in:"
step kubectl apply -n "$ns" -f "examples/app-v2.yaml"
until_status '"done":2,'
step mwrs -n "$ns" rollout status app
step mwrs -n "$ns" rollout status app -w --timeout 60s
step mwrs -n "$ns" rollout history app
step mwrs -n "$ns" rollout diff app 1 2

echo "# What v3 would do, before applying it, and if $hung fails on it (times are the strategy's own waits; this strategy has no minSuccessTime):"
step mwrs -n "$ns" rollout plan -f "examples/app-v3.yaml"
step mwrs -n "$ns" rollout plan -f "examples/app-v3.yaml" --fail "$hung"

echo "# Undo: revision 1 comes back as revision 3, as kubectl rollout undo does:"
step mwrs -n "$ns" rollout undo app --dry-run
step mwrs -n "$ns" rollout undo app
step mwrs -n "$ns" rollout status app -w --timeout 60s
step mwrs -n "$ns" rollout history app

echo "# v3 goes out and $hung hangs on it; abort by hand (status -w follows the revert and exits 4):"
step kubectl apply -n "$ns" -f "examples/app-v3.yaml"
until_status '"done":3,'
step mwrs -n "$ns" rollout status app
step mwrs -n "$ns" rollout abort app
step -x 4 mwrs -n "$ns" rollout status app -w --timeout 60s
step mwrs -n "$ns" rollout history app

echo "# $hung is fixed (the fleet's agent again, without the hang rule); retry:"
agent
step mwrs -n "$ns" rollout retry app
step mwrs -n "$ns" rollout status app -w --timeout 60s
echo "# The Events on the MWRS, one per transition:"
step kubectl get events -n "$ns" --field-selector involvedObject.name=app \
    --sort-by=.metadata.creationTimestamp -o custom-columns=TYPE:.type,REASON:.reason,NOTE:.message
