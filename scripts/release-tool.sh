#!/usr/bin/env bash
# The release pipeline's tools, built from their Go modules at the versions
# deploy/release-tools/go.mod pins: crane (go-containerregistry: pushes OCI image layouts,
# serves the local registry the pipeline's test pushes to) and cosign (Sigstore: signs and
# verifies what was pushed). Prints the binary's path; the build is cached under
# ${XDG_CACHE_HOME:-$HOME/.cache}/mwrs-tools/, keyed by go.mod, go.sum and the Go version.
#
#   scripts/release-tool.sh crane|cosign            the path of the binary
#   scripts/release-tool.sh crane|cosign ARGS...    runs it with ARGS
set -euo pipefail
name=${1:?usage: release-tool.sh crane|cosign [ARGS...]}
shift
case $name in
    crane) package=github.com/google/go-containerregistry/cmd/crane ;;
    cosign) package=github.com/sigstore/cosign/v2/cmd/cosign ;;
    *) echo "release-tool.sh: no tool $name" >&2; exit 2 ;;
esac
tool=$(cd "$(dirname "$0")/../deploy/release-tools" && pwd)
key=$( (go version; cat "$tool/go.mod" "$tool/go.sum") | sha256sum | cut -c1-16)
bin=${XDG_CACHE_HOME:-$HOME/.cache}/mwrs-tools/$name-$key/$name
if [ ! -x "$bin" ]; then
    echo "release-tool.sh: building $name from its Go module (cached as $bin)" >&2
    mkdir -p "$(dirname "$bin")"
    (cd "$tool" && CGO_ENABLED=0 go build -trimpath -o "$bin.tmp" "$package") >&2
    mv "$bin.tmp" "$bin"
fi
if (($#)); then
    exec "$bin" "$@"
fi
echo "$bin"
