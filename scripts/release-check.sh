#!/usr/bin/env bash
# Builds every release artifact (scripts/release.sh) and checks them as a user would meet
# them: the packaged chart is this version; the CLI installed by krew (built from its Go
# module) with the rendered manifest says this commit; the arm64 build does too under
# qemu-user when it is there (Debian's qemu-user-static), and the windows build under wine
# when it is there (Debian's wine64). CI runs this as a step of its own.
set -euo pipefail
cd "$(dirname "$0")/.."
KREW_VERSION=v0.4.3

dir=$(scripts/release.sh)
# shellcheck source=scripts/release-env.sh
. scripts/release-env.sh
scripts/helm.sh show chart "$dir/mwrs-controller-$version.tgz" | grep -qx "version: $version" ||
    { echo "release-check.sh: the packaged chart is not version $version" >&2; exit 1; }
for package in mwrs-controller mwrs-feedback-plugin; do
    [ -s "$dir/$package-$version.oci.tar" ] ||
        { echo "release-check.sh: no image of $package" >&2; exit 1; }
    # The binary the image packs (the archive's layer holds this very file).
    got=$("target/x86_64-unknown-linux-musl/release/$package" --version)
    echo "release-check.sh: $got" >&2
    [[ $got == *"$commit"* ]] || { echo "release-check.sh: $package: expected commit $commit" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
GOBIN=$work/bin go install "sigs.k8s.io/krew/cmd/krew@$KREW_VERSION" >&2
export KREW_ROOT=$work/krew
"$work/bin/krew" install --manifest="$dir/mwrs.yaml" \
    --archive="$(ls "$dir"/mwrs-v*-linux-amd64.tar.gz)" </dev/null >&2
got=$("$KREW_ROOT/bin/kubectl-mwrs" version)
echo "release-check.sh: krew installed: $got" >&2
[[ $got == *"commit $commit, x86_64-unknown-linux-musl"* ]] ||
    { echo "release-check.sh: expected commit $commit" >&2; exit 1; }
if command -v qemu-aarch64-static >/dev/null; then
    mkdir "$work/arm64"
    tar -xzf "$(ls "$dir"/mwrs-v*-linux-arm64.tar.gz)" -C "$work/arm64"
    got=$(qemu-aarch64-static "$work/arm64/kubectl-mwrs" version)
    echo "release-check.sh: arm64 under qemu: $got" >&2
    [[ $got == *"commit $commit, aarch64-unknown-linux-musl"* ]] ||
        { echo "release-check.sh: expected commit $commit" >&2; exit 1; }
else
    echo "release-check.sh: no qemu-aarch64-static: the arm64 build is not run" >&2
fi
if command -v wine >/dev/null; then
    mkdir "$work/windows"
    tar -xzf "$(ls "$dir"/mwrs-v*-windows-amd64.tar.gz)" -C "$work/windows"
    # Wine 8 lacks ProcessPrng, which Rust's standard library calls on Windows: a shim
    # beside the exe (see the file) stands in for Windows' own.
    x86_64-w64-mingw32-gcc -shared -O2 -o "$work/windows/bcryptprimitives.dll" \
        scripts/wine/bcryptprimitives.c -ladvapi32
    got=$(WINEDEBUG=-all WINEPREFIX=$work/wine wine "$work/windows/kubectl-mwrs.exe" version 2>/dev/null)
    echo "release-check.sh: windows under wine: $got" >&2
    [[ $got == *"commit $commit, x86_64-pc-windows-gnu"* ]] ||
        { echo "release-check.sh: expected commit $commit" >&2; exit 1; }
else
    echo "release-check.sh: no wine: the windows build is not run" >&2
fi

# What was checked, for .ci/run (which skips these checks while the inputs are the same);
# commit this file after a run on changed inputs.
cat >.ci/release-check.stamp <<STAMP
# Written by scripts/release-check.sh when it passed; .ci/run reruns the release checks
# when scripts/release-inputs.sh prints another hash.
inputs $(scripts/release-inputs.sh)
checked $(date -u +%Y-%m-%dT%H:%M:%SZ) at commit $commit
STAMP
echo "release-check.sh: passed; recorded in .ci/release-check.stamp" >&2
