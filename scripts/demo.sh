#!/usr/bin/env bash
# The demo: builds mwrs-demo, starts the test hub (a real kube-apiserver + etcd from Go
# modules, cached after the first build), plays the rollout / automatic abort / undo /
# rollout scenario against it with the controller and a simulated fleet in-process, and
# stops the hub it started. Exit code 0 when every step reached its expected state.
#
#   scripts/demo.sh [--ocm] [mwrs-demo arguments]
#
# --plugin (an mwrs-demo argument) rolls out behind the reference rollout plugin
# (mwrs-feedback-plugin, in mwrs-demo's process): v2 is reported done everywhere, and the
# plugin's FAILED on the second group, read from the Deployment's status feedback, sets
# off the abort.
#
# --dashboard (an mwrs-demo argument) shows the rollout in `mwrs dashboard` too, run in
# mwrs-demo's process on 127.0.0.1: it prints the page's URL (with its token) and, on a
# terminal, waits for Enter before the first step and before cleaning up. With
# --clusters 5000 there is a fleet's worth to watch; the page's Pause, Abort, Retry and
# Undo buttons write what the `kubectl mwrs rollout` commands write.
#
# --ocm plays the same story on upstream OCM's components instead of the simulated fleet:
# e2e/env.sh starts a hub with upstream's placement controller and three spokes (each its
# own test hub) with upstream's work agent (built from the Go module and cached: the first
# run takes several minutes more); the timeline then also shows each spoke's object.
#
# Environment:
#   MWRS_HUB_DIR   state dir of the hub (default: a fresh mktemp dir, removed at exit);
#                  a hub already running there is reused and left running
#   MWRS_E2E_DIR   with --ocm: state dir of the hub and spokes (default: a fresh mktemp
#                  dir, removed at exit); an environment already running there is reused
#                  and left running
#   CARGO_PROFILE  release|dev (default dev)
# Other arguments go to mwrs-demo (see `mwrs-demo --help`: --clusters, --deadline, --keep,
# --dashboard-port).
set -euo pipefail
cd "$(dirname "$0")/.."

profile=${CARGO_PROFILE:-dev}
case $profile in
  release) cargo_args=(--release); target_sub=release ;;
  dev) cargo_args=(); target_sub=debug ;;
  *) echo "demo.sh: CARGO_PROFILE must be dev or release" >&2; exit 2 ;;
esac

echo "demo.sh: building mwrs-demo ($profile)" >&2
cargo build "${cargo_args[@]}" -p mwrs-demo --bin mwrs-demo >&2
target_dir=$(cargo metadata --format-version 1 --no-deps 2>/dev/null |
  sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
demo_bin=${target_dir:-$PWD/target}/$target_sub/mwrs-demo
[ -x "$demo_bin" ] || { echo "demo.sh: $demo_bin not built" >&2; exit 1; }

ocm=0
args=()
for a in "$@"; do
  if [ "$a" = --ocm ]; then ocm=1; else args+=("$a"); fi
done
set -- ${args[@]+"${args[@]}"}

if [ "$ocm" = 1 ]; then
  own_dir=""
  if [ -z "${MWRS_E2E_DIR:-}" ]; then
    own_dir=$(mktemp -d "${TMPDIR:-/tmp}/mwrs-e2e-demo.XXXXXX")
    export MWRS_E2E_DIR=$own_dir
  fi
  started_env=1
  if e2e/env.sh status; then started_env=0; fi
  cleanup_ocm() {
    if [ "$started_env" = 1 ]; then e2e/env.sh down >&2 || true; fi
    if [ -n "$own_dir" ]; then rm -rf "$own_dir"; fi
  }
  trap cleanup_ocm EXIT
  trap 'exit 130' INT TERM
  echo "demo.sh: starting upstream OCM's placement controller, a hub and three spokes with" \
    "upstream's work agent in $MWRS_E2E_DIR (first run builds them: several minutes)" >&2
  # shellcheck disable=SC1090
  . "$(e2e/env.sh up)"
  start=$(date +%s)
  status=0
  "$demo_bin" --kubeconfig "$MWRS_E2E_HUB_KUBECONFIG" --spokes "$MWRS_E2E_CLUSTERS" "$@" ||
    status=$?
  echo "demo.sh: mwrs-demo exited $status after $(($(date +%s) - start))s" >&2
  exit "$status"
fi

own_dir=""
if [ -z "${MWRS_HUB_DIR:-}" ]; then
  own_dir=$(mktemp -d "${TMPDIR:-/tmp}/mwrs-hub-demo.XXXXXX")
  export MWRS_HUB_DIR=$own_dir
fi
# A hub already running in that dir is someone else's: reuse it, leave it running.
started_hub=1
if scripts/hub.sh status >/dev/null 2>&1; then started_hub=0; fi
cleanup() {
  if [ "$started_hub" = 1 ]; then scripts/hub.sh down >&2 || true; fi
  if [ -n "$own_dir" ]; then rm -rf "$own_dir"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "demo.sh: starting the test hub in $MWRS_HUB_DIR (first run builds it: several minutes)" >&2
kubeconfig=$(scripts/hub.sh up)

start=$(date +%s)
status=0
"$demo_bin" --kubeconfig "$kubeconfig" "$@" || status=$?
echo "demo.sh: mwrs-demo exited $status after $(($(date +%s) - start))s" >&2
exit "$status"
