#!/usr/bin/env bash
# The whole test suite: builds and starts the test hub (a real kube-apiserver + etcd from
# Go modules) and upstream OCM's cluster-manager operator, runs every Rust test against
# them, and stops the hub it started.
# Extra arguments go to `cargo test` (e.g. scripts/test.sh -p mwrs-engine).
set -euo pipefail
cd "$(dirname "$0")/.."

export MWRS_HUB_DIR=${MWRS_HUB_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/mwrs-hub-test.XXXXXX")}
kubeconfig=$(scripts/hub.sh up)
trap 'scripts/hub.sh down || true' EXIT
export MWRS_TEST_KUBECONFIG=$kubeconfig
# Upstream's cluster-manager operator for crates/controller/tests/operator.rs (cached after
# the first build, ~7 min cold).
MWRS_OCM_OPERATOR=$(bench/peer/build.sh registration-operator)
export MWRS_OCM_OPERATOR

cargo test --workspace --all-targets "$@"
