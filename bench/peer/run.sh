#!/usr/bin/env bash
# Runs upstream OCM's hub work manager (the ManifestWorkReplicaSet controller) against a
# hub in the foreground: the script execs the binary, so the caller's pid is the
# controller's pid, to measure (RSS) and to stop (SIGTERM).
#
#   bench/peer/run.sh KUBECONFIG [extra `work manager` flags...]
#
# Flags set here so it runs outside a cluster (later extra flags override them):
#   --feature-gates=ManifestWorkReplicaSet=true  the MWRS controller is alpha, off by default
#   --disable-leader-election                    one replica; no Lease round trips
#   --namespace NS                               where its Events go (no in-cluster SA file)
#   --listen 127.0.0.1:PORT                      its metrics/healthz HTTPS server; the
#                                                default 0.0.0.0:8443 may be taken
# Environment:
#   MWRS_PEER_BIN        use this binary instead of building/looking up bench/peer/build.sh's
#   MWRS_PEER_NAMESPACE  namespace for Events (default: default)
#   MWRS_PEER_LISTEN     ip:port for metrics/healthz (default 127.0.0.1:<a free port>)
set -euo pipefail

PEER_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

if [ $# -lt 1 ] || [ ! -f "$1" ]; then
  echo "usage: $0 KUBECONFIG [extra work-manager flags...]" >&2
  exit 2
fi
kubeconfig=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
shift

bin=${MWRS_PEER_BIN:-}
if [ -z "$bin" ]; then
  bin=$("$PEER_SRC/build.sh")
fi
[ -x "$bin" ] || {
  echo "peer/run.sh: no executable at $bin" >&2
  exit 1
}

# A free loopback port: bind :0 and read what the kernel gave. The port is released
# before the controller binds it, so a race is possible but unlikely on loopback.
free_port() {
  if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
  else
    echo $((20000 + RANDOM % 20000))
  fi
}
listen=${MWRS_PEER_LISTEN:-127.0.0.1:$(free_port)}

echo "peer/run.sh: exec $bin manager (listen $listen)" >&2
exec "$bin" manager \
  --kubeconfig "$kubeconfig" \
  --feature-gates=ManifestWorkReplicaSet=true \
  --disable-leader-election \
  --namespace "${MWRS_PEER_NAMESPACE:-default}" \
  --listen "$listen" \
  "$@"
