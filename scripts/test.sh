#!/usr/bin/env bash
# The whole test suite: builds and starts the test hub (a real kube-apiserver + etcd from
# Go modules), upstream OCM's cluster-manager operator and the end-to-end environment
# (e2e/env.sh), runs every Rust test against them, and stops what it started.
# Extra arguments go to `cargo test` (e.g. scripts/test.sh -p mwrs-engine).
set -euo pipefail
cd "$(dirname "$0")/.."

export MWRS_HUB_DIR=${MWRS_HUB_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/mwrs-hub-test.XXXXXX")}
kubeconfig=$(scripts/hub.sh up)
export MWRS_E2E_DIR=${MWRS_E2E_DIR:-$MWRS_HUB_DIR/e2e}
trap 'e2e/env.sh down || true; scripts/hub.sh down || true' EXIT
export MWRS_TEST_KUBECONFIG=$kubeconfig
# The end-to-end environment (e2e/env.sh: a hub and three spokes with upstream's placement
# controller and work agents) for the mwrs-e2e tests.
# shellcheck disable=SC1090
. "$(e2e/env.sh up)"
# Upstream's cluster-manager operator for crates/controller/tests/operator.rs (cached after
# the first build, ~7 min cold).
MWRS_OCM_OPERATOR=$(bench/peer/build.sh registration-operator)
export MWRS_OCM_OPERATOR

# kubectl at the hub's version, for the README walkthrough's script (examples/).
PATH="$(dirname "$(scripts/hub.sh kubectl)"):$PATH"

cargo test --workspace --all-targets "$@"
