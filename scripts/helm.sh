#!/usr/bin/env bash
# Helm, built from its Go module at the version deploy/helm/tool/go.mod pins (v4), for the
# chart's tests and for rendering deploy/ from the chart. Prints the binary's path; the
# build is cached under ${XDG_CACHE_HOME:-$HOME/.cache}/mwrs-tools/, keyed by go.mod,
# go.sum and the Go version (cold: a few minutes on 2 cores).
#
#   scripts/helm.sh                  the path of the helm binary
#   scripts/helm.sh ARGS...          runs helm with ARGS
set -euo pipefail
tool=$(cd "$(dirname "$0")/../deploy/helm/tool" && pwd)
key=$( (go version; cat "$tool/go.mod" "$tool/go.sum") | sha256sum | cut -c1-16)
bin=${XDG_CACHE_HOME:-$HOME/.cache}/mwrs-tools/helm-$key/helm
if [ ! -x "$bin" ]; then
    echo "helm.sh: building helm from its Go module (cached as $bin)" >&2
    mkdir -p "$(dirname "$bin")"
    (cd "$tool" && CGO_ENABLED=0 go build -trimpath -o "$bin.tmp" helm.sh/helm/v4/cmd/helm) >&2
    mv "$bin.tmp" "$bin"
fi
if (($#)); then
    exec "$bin" "$@"
fi
echo "$bin"
