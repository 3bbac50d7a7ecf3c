#!/usr/bin/env bash
# The oldest Kubernetes the chart claims (deploy/helm/mwrs-controller/Chart.yaml: kubeVersion
# ">=1.27.0-0"), for real: builds and starts the test hub at that version (scripts/hub.sh
# with MWRS_HUB_K8S, in its own state dir), runs the controller's hub tests that exercise the
# API server itself against it -- lifecycle, rollout, crd_defaults, crd_runtime, and the
# chart's install and chart tests with Helm (scripts/helm.sh) and kubectl at that version on
# PATH -- then stops the hub. Exits non-zero if the hub cannot be built or started or any
# test fails.
#
# Kept out of CI and out of scripts/test.sh: a cold build of Kubernetes at another version
# takes ~15 minutes on 2 cores (cached afterwards under ${XDG_CACHE_HOME:-$HOME/.cache}).
#
#   scripts/compat.sh [CARGO TEST ARGS]...    extra arguments go to `cargo test`
#
# Environment:
#   MWRS_COMPAT_K8S   Kubernetes version (default v1.27.16, the last 1.27 release)
#   MWRS_HUB_DIR      the hub's state dir (default /tmp/mwrs-hub-compat; not the default
#                     hub's, which keeps running)
set -euo pipefail
cd "$(dirname "$0")/.."

export MWRS_HUB_K8S=${MWRS_COMPAT_K8S:-v1.27.16}
export MWRS_HUB_DIR=${MWRS_HUB_DIR:-/tmp/mwrs-hub-compat}

log() { echo "compat.sh: $*" >&2; }

log "test hub at Kubernetes $MWRS_HUB_K8S in $MWRS_HUB_DIR"
trap 'scripts/hub.sh down || true' EXIT
kubeconfig=$(scripts/hub.sh up)
export MWRS_TEST_KUBECONFIG=$kubeconfig

# Helm (v4, from its Go module) and kubectl at the hub's version, for the install and
# chart tests.
MWRS_HELM=$(scripts/helm.sh)
export MWRS_HELM
PATH="$(dirname "$(scripts/hub.sh kubectl)"):$PATH"

cargo test -p mwrs-controller \
  --test lifecycle --test rollout --test crd_defaults --test crd_runtime \
  --test install --test chart "$@"
log "all tests passed against Kubernetes $MWRS_HUB_K8S"
