#!/usr/bin/env bash
# The whole test suite: builds and starts the test hub (a real kube-apiserver + etcd from
# Go modules), upstream OCM's cluster-manager operator, the end-to-end environment
# (e2e/env.sh), Helm (scripts/helm.sh) and the controller's image (scripts/image.sh), runs
# every Rust test against them and the dashboard page's JavaScript tests (node --test),
# and stops what it started.
# Extra arguments go to `cargo test` (e.g. scripts/test.sh -p mwrs-engine).
# Prints a table of its phases at the end (and on failure) and the slowest test binaries.
# MWRS_TEST_JOBS: test binaries run at once (default 3).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/phases.sh
. scripts/phases.sh

# Sets the variable named $1 to what the rest of the line prints (in this shell, so that a
# phase can capture it).
capture() {
    local captured
    captured=$("${@:2}") || return
    printf -v "$1" '%s' "$captured"
}

export MWRS_HUB_DIR=${MWRS_HUB_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/mwrs-hub-test.XXXXXX")}
export MWRS_E2E_DIR=${MWRS_E2E_DIR:-$MWRS_HUB_DIR/e2e}
trap 'status=$?; e2e/env.sh down || true; scripts/hub.sh down || true; phase_table "scripts/test.sh phases"; exit $status' EXIT
phase "test hub" capture MWRS_TEST_KUBECONFIG scripts/hub.sh up
export MWRS_TEST_KUBECONFIG
# The end-to-end environment (e2e/env.sh: a hub and three spokes with upstream's placement
# controller and work agents) for the mwrs-e2e tests.
phase "e2e environment" capture e2e_env e2e/env.sh up
# shellcheck disable=SC1090
. "$e2e_env"
# Upstream's cluster-manager operator for crates/controller/tests/operator.rs (cached after
# the first build, ~7 min cold).
phase "upstream's operator" capture MWRS_OCM_OPERATOR bench/peer/build.sh registration-operator
export MWRS_OCM_OPERATOR

# Helm v4 from its Go module, for the chart's tests (crates/controller/tests/chart.rs).
phase helm capture MWRS_HELM scripts/helm.sh
export MWRS_HELM

# The controller's container image for crates/controller/tests/image.rs (scripts/image.sh:
# a static musl build, packed by scripts/oci-image.py; a few minutes cold). CI must have
# it; elsewhere a machine that cannot build it (no musl-tools and not root) skips that one
# test, and says so.
if phase image capture MWRS_IMAGE scripts/image.sh; then
    export MWRS_IMAGE
elif [ "${CI:-}" = true ]; then
    echo "test.sh: scripts/image.sh failed" >&2
    exit 1
else
    echo "test.sh: WARNING: no image (scripts/image.sh failed above): tests/image.rs skips" >&2
fi

# kubectl at the hub's version, for the getting-started walkthrough's script (examples/).
phase kubectl capture kubectl scripts/hub.sh kubectl
PATH="$(dirname "$kubectl"):$PATH"

# Chromium and its WebDriver, for the dashboard's browser test (crates/cli/tests/browser.rs):
# Debian's packages, installed when run as root; elsewhere that test skips, and says so.
if ! command -v chromedriver >/dev/null && [ "$(id -u)" = 0 ]; then
    phase chromium scripts/test-tools.sh chromium
fi

# The dashboard page's pure logic (crates/cli/src/cmd/dashboard/assets/view.js).
if command -v node >/dev/null; then
    phase "dashboard page (node --test)" node --test crates/cli/src/cmd/dashboard/assets/
elif [ "${CI:-}" = true ]; then
    echo "test.sh: node is needed for the dashboard page's tests" >&2
    exit 1
else
    echo "test.sh: WARNING: no node: the dashboard page's tests do not run" >&2
fi

# Built first, then run, so that the table tells compiling from testing. The whole suite
# runs its binaries a few at a time (scripts/run-tests.py: the rules that keep some apart,
# the slowest binaries at the end); with arguments, `cargo test` runs them as usual.
executables=$MWRS_HUB_DIR/test-executables.json
phase "cargo test: build" capture built \
    cargo test --workspace --all-targets --no-run --message-format=json-render-diagnostics "$@"
printf '%s\n' "$built" >"$executables"
if (($#)); then
    phase "cargo test: run" cargo test --workspace --all-targets "$@"
else
    phase "cargo test: run" python3 scripts/run-tests.py "$executables" \
        --jobs "${MWRS_TEST_JOBS:-3}" --times "${XDG_CACHE_HOME:-$HOME/.cache}/mwrs-test-times.json"
fi
