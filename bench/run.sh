#!/usr/bin/env bash
# Fleet-scale benchmarks (bench/README.md): builds the controller and the harness in release
# mode, starts a private test hub, runs `mwrs-bench` for each size and stops the hub.
#
#   bench/run.sh                       # N = 1,000 and 5,000, with upstream's controller as peer
#   bench/run.sh --sizes 1000 --no-peer
#   BENCH_JSON=out.json bench/run.sh   # also write the results as JSON
#   bench/run.sh --record ...          # also file them in bench/results/ (the book's results
#                                      # page is written from there: commit the file)
#   bench/run.sh --plugin-clusters 1000 --no-peer   # the rollout-plugin run instead
#   bench/run.sh --dashboard-clusters 5000 --no-peer   # the dashboard run instead
#   bench/run.sh --ceiling 100         # OCM's hub ceiling instead: 100 MWRS × 3,000 clusters
#                                      # (300,000 ManifestWorks, bench/src/many/); --ceiling 10
#                                      # is the smaller version (30,000, 4 MWRS at once)
#   bench/run.sh --ceiling 10 --hub-watch-cache   # the hub keeps its ManifestWork watch cache,
#                                      # under GOMEMLIMIT (default 5GiB; set it to change)
#
# Extra arguments go to mwrs-bench (see `mwrs-bench --help`).
set -euo pipefail
cd "$(dirname "$0")/.."

peer=1
args=()
ceiling=
watch_cache=0
# The command as typed, for the record (bench/src/record.rs).
export BENCH_COMMAND="bench/run.sh $*"
for a in "$@"; do
  if [ "$ceiling" = next ]; then
    ceiling=$a
    continue
  fi
  case $a in
    --ceiling) ceiling=next ;;
    --no-peer) peer=0 ;;
    --hub-watch-cache) watch_cache=1 ;;
    --record) args+=(--record "$PWD/bench/results") ;;
    *) args+=("$a") ;;
  esac
done

if [ -n "$ceiling" ]; then
  [[ $ceiling =~ ^[0-9]+$ ]] || { echo "bench/run.sh: --ceiling needs a count of MWRS" >&2; exit 2; }
  peer=0
  # The bare client writes the ManifestWorks of a sample of names and its figures for
  # more are scaled: 10 names (30,000) past 10 MWRS, where its full 300,000 three times
  # over would not fit the run; 3 names (9,000) up to 10 MWRS, so that `--ceiling 10`
  # fits in 30 minutes. Waits get an hour: every MWRS changing at once is 300,000 writes
  # and as many status reports.
  sample=3
  [ "$ceiling" -gt 10 ] && sample=10
  [[ " $* " == *" --many-bare-sample "* ]] || args=(--many-bare-sample "$sample" "${args[@]}")
  # Ten MWRS change at once past 10 MWRS; 4 up to 10, for the same 30 minutes (8 at once
  # took 6.6 of them at 30,000). An explicit --many-at-once wins.
  if [ "$ceiling" -le 10 ] && [[ " $* " != *" --many-at-once "* ]]; then
    args+=(--many-at-once 4)
  fi
  # Five rounds of the one-MWRS change up to 10 MWRS (30,000), so that one run's median
  # tells whether it is within 1.10x; three past that, where each round is 300,000.
  if [ "$ceiling" -le 10 ] && [[ " $* " != *" --many-rounds "* ]]; then
    args+=(--many-rounds 5)
  fi
  args=(--many-mwrs "$ceiling" --many-clusters 3000 --timeout-secs 3600 "${args[@]}")
  # From 10 MWRS, every MWRS changing at once is measured over its first minutes (its
  # throughput, peak and queue delay then), not to its end: at 300,000 on 2 cores its end
  # is about 90 minutes on its own, at 30,000 nine. 5 minutes past 10 MWRS, 2 at 10. An
  # explicit --many-all-window wins.
  if [ "$ceiling" -ge 10 ] && [[ " $* " != *" --many-all-window "* ]]; then
    window=120
    [ "$ceiling" -gt 10 ] && window=300
    args+=(--many-all-window "$window")
  fi
  # The test hub as sized for it:
  # - no watch cache for ManifestWorks: the API server's cache holds each one decoded,
  #   and with it the hub process took 9.3 GiB at 30,000 (`--ceiling 10`), which at
  #   300,000 would not fit this machine's 24 GiB. Lists and watches of ManifestWorks are
  #   served from etcd instead; a production hub at that size keeps the cache and needs
  #   the memory (bench/README.md, "OCM's hub ceiling"). With --hub-watch-cache the cache
  #   stays, and the hub's Go runtime gets a soft memory limit (inherited by the test
  #   hub's process): without one, most of those 9.3 GiB were garbage the default GC
  #   target let grow.
  # - requests may take 10 minutes (60 s by default). Without the watch cache, a list
  #   with a label selector reads every ManifestWork from etcd to fill its page: the
  #   controller's watch of hashed-owner ManifestWorks, which match none here, reads all
  #   of them for each of its (empty) lists, and at 150,000 each ran past 60 s and was
  #   tried again for ever.
  # - etcd is compacted every 20 minutes (5 by default): a list of every ManifestWork in
  #   pages must end within one interval (a compaction expires its continue token and
  #   the list starts over). At 300,000 with no watch cache a relist outlived even 5
  #   minutes under load, started over, and left the controller's cache behind the hub.
  # - without the cache, a soft memory limit of 10 GiB: in the fourth 300,000 run the
  #   hub's RSS reached 17.4 GiB (13.9 anonymous) while every MWRS changed, and 6.8 GiB
  #   once collected, next to the harness's 3 GiB on a 24 GiB machine.
  if [ "$watch_cache" = 1 ]; then
    export GOMEMLIMIT=${GOMEMLIMIT:-5GiB}
  else
    export GOMEMLIMIT=${GOMEMLIMIT:-10GiB}
    export MWRS_HUB_ARGS="${MWRS_HUB_ARGS:-} --apiserver-arg=--watch-cache-sizes=manifestworks.work.open-cluster-management.io#0"
  fi
  export MWRS_HUB_ARGS="${MWRS_HUB_ARGS:-} --apiserver-arg=--request-timeout=10m --apiserver-arg=--etcd-compaction-interval=20m"
elif [ "$watch_cache" = 1 ]; then
  echo "bench/run.sh: --hub-watch-cache goes with --ceiling (other runs keep the cache)" >&2
  exit 2
fi

cargo build --release -p mwrs-controller -p mwrs-bench -p mwrs-cli -p mwrs-feedback-plugin >&2

peer_args=()
if [ "$peer" = 1 ]; then
  if bench/peer/build.sh >/dev/null; then
    peer_args=(--peer "$PWD/bench/peer/run.sh")
  else
    echo "bench/run.sh: the upstream peer did not build; measuring without it" >&2
  fi
fi

export MWRS_HUB_DIR=${MWRS_HUB_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/mwrs-hub-bench.XXXXXX")}
kubeconfig=$(scripts/hub.sh up)
trap 'scripts/hub.sh down || true' EXIT

json=()
[ -n "${BENCH_JSON:-}" ] && json=(--json "$BENCH_JSON")
# The hub's CPU is split out of the measured windows.
hub_pid=()
[ -r "$MWRS_HUB_DIR/hub.pid" ] && hub_pid=(--hub-pid "$(cat "$MWRS_HUB_DIR/hub.pid")")
target/release/mwrs-bench --kubeconfig "$kubeconfig" \
  --controller "$PWD/target/release/mwrs-controller" --cli "$PWD/target/release/mwrs" \
  --feedback-plugin "$PWD/target/release/mwrs-feedback-plugin" \
  --workdir "$MWRS_HUB_DIR/bench" "${peer_args[@]}" "${json[@]}" "${hub_pid[@]}" "${args[@]}"
