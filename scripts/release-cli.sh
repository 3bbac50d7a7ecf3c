#!/usr/bin/env bash
# Release binaries of the CLI (`kubectl-mwrs` and its completion helper
# `kubectl_complete-mwrs`) for linux amd64 and arm64 and windows amd64, packed for krew.
#
#   scripts/release-cli.sh [BASE_URL]
#       target/release-cli/mwrs-v<version>-{linux-amd64,linux-arm64,windows-amd64}.tar.gz,
#       their .sha256, and target/release-cli/mwrs.yaml: deploy/krew/mwrs.yaml filled in
#       with the version, the sha256s and BASE_URL (where the archives will be published;
#       default: the directory itself, as a file:// address, for a local `kubectl krew
#       install`). Prints the directory.
#
# The linux builds are musl builds (static: they run on any Linux), stripped, with paths
# remapped and the commit in `mwrs version`; arm64 is cross-compiled with Debian's aarch64
# gcc, windows with Debian's mingw-w64 (it needs Windows 10 or later: Rust's standard
# library calls ProcessPrng). Installs what it needs when missing (musl-tools,
# gcc-aarch64-linux-gnu, gcc-mingw-w64-x86-64, Rust's targets).
set -euo pipefail
cd "$(dirname "$0")/.."

out=target/release-cli
base_url=${1:-file://$PWD/$out}
homepage=${MWRS_HOMEPAGE:-$(git remote get-url origin 2>/dev/null || echo "https://open-cluster-management.io")}
# shellcheck source=scripts/release-env.sh
. scripts/release-env.sh
need musl-gcc musl-tools aarch64-linux-gnu-gcc gcc-aarch64-linux-gnu \
    x86_64-w64-mingw32-gcc gcc-mingw-w64-x86-64


mkdir -p "$out"
declare -A sums
for platform in linux-amd64 linux-arm64 windows-amd64; do
    target=$(rust_target "$platform")
    exe=
    [[ $platform == windows-* ]] && exe=.exe
    release_build "$target" mwrs-cli
    stage=$(mktemp -d)
    # (No `mwrs` beside them: it is kubectl-mwrs under another name, and krew refuses
    # links in an archive. Link it yourself to run the CLI outside kubectl.)
    for bin in kubectl-mwrs kubectl_complete-mwrs; do
        cp "target/$target/release/$bin$exe" "$stage/"
    done
    cp LICENSE "$stage/"
    archive=$out/mwrs-v$version-$platform.tar.gz
    # Reproducible: sorted names, fixed owner and times, no gzip timestamp.
    tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" \
        -C "$stage" -cf - . | gzip -n >"$archive"
    rm -rf "$stage"
    sums[$platform]=$(sha256sum "$archive" | cut -d' ' -f1)
    echo "${sums[$platform]}  $(basename "$archive")" >"$archive.sha256"
done

sed -e "s|@VERSION@|$version|g" -e "s|@BASE_URL@|$base_url|g" -e "s|@HOMEPAGE@|$homepage|g" \
    -e "s|@SHA256_LINUX_AMD64@|${sums[linux-amd64]}|g" -e "s|@SHA256_LINUX_ARM64@|${sums[linux-arm64]}|g" \
    -e "s|@SHA256_WINDOWS_AMD64@|${sums[windows-amd64]}|g" \
    deploy/krew/mwrs.yaml | grep -v '^#' >"$out/mwrs.yaml"
echo "$PWD/$out"
