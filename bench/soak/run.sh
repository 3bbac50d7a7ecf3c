#!/usr/bin/env bash
# The fault soak (issue #34; bench/src/soak/): on a private test hub whose API server keeps
# an audit log of the controllers' writes, two controller replicas with leader election,
# the reference rollout plugin and the simulated fleet in decision groups go through
# rollouts, aborts, undos, retries and history-limit changes while faults are injected at
# random; the invariants are checked over what the hub saw. Exits non-zero on a violation.
#
#   bench/soak/run.sh --seed 7 --duration 10m            # 1,000 clusters in 5 groups
#   bench/soak/run.sh --seed 7 --duration 3m --clusters 200 --debug   # CI's short run
#   bench/soak/run.sh --seed 7 --duration 90m --rounds 60  # the long run: 60 rounds (~65 min)
#   bench/soak/run.sh ... --record                       # file the report in bench/results/
#
# Other arguments go to mwrs-bench (see `mwrs-bench --help`).
set -euo pipefail
cd "$(dirname "$0")/../.."

export BENCH_COMMAND="bench/soak/run.sh $*"
seed=1 duration=10m clusters=1000 groups=5 profile=release
extra=()
while [ $# -gt 0 ]; do
  case $1 in
    --seed) seed=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --clusters) clusters=$2; shift 2 ;;
    --groups) groups=$2; shift 2 ;;
    --rounds) extra+=(--soak-rounds "$2"); shift 2 ;;
    --debug) profile=debug; shift ;;
    --record) extra+=(--record "$PWD/bench/results"); shift ;;
    *) extra+=("$1"); shift ;;
  esac
done

packages=(-p mwrs-controller -p mwrs-bench -p mwrs-cli -p mwrs-feedback-plugin)
if [ "$profile" = release ]; then
  cargo build --release "${packages[@]}" >&2
else
  # The test suite's build (scripts/test.sh runs the same command): its binaries, built with
  # the features the tests unify, are the ones run; a build of the four packages alone
  # would compile their dependencies again with other features.
  cargo test --workspace --all-targets --no-run >&2
fi
bin=$PWD/target/$profile

export MWRS_HUB_DIR=${MWRS_HUB_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/mwrs-hub-soak.XXXXXX")}
audit=$MWRS_HUB_DIR/audit.log
export MWRS_HUB_ARGS="--pausable-etcd --apiserver-arg=--audit-policy-file=$PWD/bench/soak/audit-policy.yaml --apiserver-arg=--audit-log-path=$audit"
kubeconfig=$(scripts/hub.sh up)
# The harness's own clients retry through every hub fault: their errors are noise here.
export RUST_LOG=${RUST_LOG:-warn,kube_client=off,kube_runtime=off}
trap 'scripts/hub.sh down || true' EXIT

"$bin/mwrs-bench" --kubeconfig "$kubeconfig" \
  --controller "$bin/mwrs-controller" --cli "$bin/mwrs" \
  --feedback-plugin "$bin/mwrs-feedback-plugin" \
  --workdir "$MWRS_HUB_DIR/soak" --hub-pid "$(cat "$MWRS_HUB_DIR/hub.pid")" \
  --audit-log "$audit" --idle-secs 15 \
  --soak "$duration" --seed "$seed" --soak-clusters "$clusters" --soak-groups "$groups" \
  "${extra[@]}"
