#!/usr/bin/env bash
# The whole test suite: builds and starts the test hub (a real kube-apiserver + etcd from
# Go modules), upstream OCM's cluster-manager operator, the end-to-end environment
# (e2e/env.sh), Helm (scripts/helm.sh) and the controller's image (scripts/image.sh), runs
# every Rust test against them and the dashboard page's JavaScript tests (node --test),
# and stops what it started.
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

# Helm v4 from its Go module, for the chart's tests (crates/controller/tests/chart.rs).
MWRS_HELM=$(scripts/helm.sh)
export MWRS_HELM

# The controller's container image for crates/controller/tests/image.rs (scripts/image.sh:
# buildah and a static musl build; a few minutes cold). CI must have it; elsewhere a
# machine that cannot build it (not root, no buildah) skips that one test, and says so.
if MWRS_IMAGE=$(scripts/image.sh); then
    export MWRS_IMAGE
elif [ "${CI:-}" = true ]; then
    echo "test.sh: scripts/image.sh failed" >&2
    exit 1
else
    echo "test.sh: WARNING: no image (scripts/image.sh failed above): tests/image.rs skips" >&2
fi

# kubectl at the hub's version, for the README walkthrough's script (examples/).
PATH="$(dirname "$(scripts/hub.sh kubectl)"):$PATH"

# Chromium and its WebDriver, for the dashboard's browser test (crates/cli/tests/browser.rs):
# Debian's packages, installed when run as root; elsewhere that test skips, and says so.
if ! command -v chromedriver >/dev/null && [ "$(id -u)" = 0 ]; then
    echo "test.sh: installing chromium and chromium-driver" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >&2 ||
        { apt-get update -qq >&2 &&
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >&2; }
fi

# The dashboard page's pure logic (crates/cli/src/cmd/dashboard/assets/view.js).
if command -v node >/dev/null; then
    node --test crates/cli/src/cmd/dashboard/assets/
elif [ "${CI:-}" = true ]; then
    echo "test.sh: node is needed for the dashboard page's tests" >&2
    exit 1
else
    echo "test.sh: WARNING: no node: the dashboard page's tests do not run" >&2
fi

cargo test --workspace --all-targets "$@"
