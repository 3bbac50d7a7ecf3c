#!/usr/bin/env bash
# The whole test suite: builds and starts the test hub (a real kube-apiserver + etcd from
# Go modules), runs every Rust test against it, and stops the hub it started.
# Extra arguments go to `cargo test` (e.g. scripts/test.sh -p mwrs-engine).
set -euo pipefail
cd "$(dirname "$0")/.."

export MWRS_HUB_DIR=${MWRS_HUB_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/mwrs-hub-test.XXXXXX")}
kubeconfig=$(scripts/hub.sh up)
trap 'scripts/hub.sh down || true' EXIT
export MWRS_TEST_KUBECONFIG=$kubeconfig

cargo test --workspace --all-targets "$@"
