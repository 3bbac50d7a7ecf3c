#!/usr/bin/env bash
# Builds every release artifact (scripts/release.sh) and checks them as a user would meet
# them: the packaged chart is this version; the CLI installed by krew (built from its Go
# module) with the rendered manifest says this commit, and so does krew's install from a
# local index whose archives are served over HTTP; the arm64 build does too under
# qemu-user when it is there (Debian's qemu-user-static), and the windows build under wine
# when it is there (Debian's wine64). Then the pipeline as it publishes: a local OCI
# registry (crane's), scripts/publish.sh to it with a throwaway cosign key, every signature
# and SBOM attestation verified, both platforms in each image index (the arm64 image's
# binary run under qemu), and crates/controller/tests/published.rs installing the chart
# from the registry on a private test hub and running the pulled image as its pod spec
# says. CI runs this as a step of its own.
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

# Krew from an index, as `kubectl krew index add` users meet it: the manifest in a git
# repository, its archives served over HTTP.
serve_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 -m http.server "$serve_port" --bind 127.0.0.1 --directory "$dir" >/dev/null 2>&1 &
server=$!
for _ in $(seq 100); do
    curl -sf -o /dev/null "http://127.0.0.1:$serve_port/mwrs.yaml" && break
    sleep 0.1
done
mkdir -p "$work/index/plugins"
sed "s|file://$PWD/target/dist|http://127.0.0.1:$serve_port|" "$dir/mwrs.yaml" >"$work/index/plugins/mwrs.yaml"
git -C "$work/index" init -q && git -C "$work/index" add . &&
    git -C "$work/index" -c user.name=ci -c user.email=ci@localhost commit -qm index
export KREW_ROOT=$work/krew-index
"$work/bin/krew" index add local "$work/index" >&2
"$work/bin/krew" install local/mwrs </dev/null >&2
kill "$server"
got=$("$KREW_ROOT/bin/kubectl-mwrs" version)
echo "release-check.sh: krew installed from a local index: $got" >&2
[[ $got == *"commit $commit"* ]] || { echo "release-check.sh: expected commit $commit" >&2; exit 1; }

# The registry pipeline.
crane=$(scripts/release-tool.sh crane)
cosign=$(scripts/release-tool.sh cosign)
registry_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
registry=127.0.0.1:$registry_port
"$crane" registry serve --address "$registry" >"$work/registry.log" 2>&1 &
registry_pid=$!
trap 'kill $registry_pid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 50); do
    curl -sf "http://$registry/v2/" >/dev/null && break
    sleep 0.2
done
(cd "$work" && COSIGN_PASSWORD=check "$cosign" generate-key-pair >&2)
COSIGN_KEY=$work/cosign.key COSIGN_PASSWORD=check scripts/publish.sh "$registry" --plain-http >&2
insecure=(--allow-http-registry --allow-insecure-registry --insecure-ignore-tlog)
while read -r kind repository digest; do
    "$cosign" verify --key "$work/cosign.pub" "${insecure[@]}" "$repository@$digest" >/dev/null
    echo "release-check.sh: $kind $repository@$digest: signature verified" >&2
    [ "$kind" = image ] || continue
    "$cosign" verify-attestation --key "$work/cosign.pub" "${insecure[@]}" --type spdxjson \
        "$repository@$digest" >/dev/null
    platforms=$("$crane" --insecure manifest "$repository@$digest" |
        python3 -c 'import json,sys; print(" ".join(sorted(m["platform"]["os"]+"/"+m["platform"]["architecture"] for m in json.load(sys.stdin)["manifests"])))')
    [ "$platforms" = "linux/amd64 linux/arm64" ] ||
        { echo "release-check.sh: $repository: platforms $platforms" >&2; exit 1; }
    echo "release-check.sh: $repository: $platforms, SBOM attested" >&2
    if command -v qemu-aarch64-static >/dev/null; then
        rm -rf "$work/arm64-image" && mkdir "$work/arm64-image"
        "$crane" --insecure --platform linux/arm64 export "$repository@$digest" - |
            tar -x -C "$work/arm64-image"
        got=$(qemu-aarch64-static "$work/arm64-image/usr/local/bin/$(basename "$repository")" --version)
        echo "release-check.sh: arm64 image under qemu: $got" >&2
        [[ $got == *"$commit"* ]] || { echo "release-check.sh: expected commit $commit" >&2; exit 1; }
    fi
done <"$dir/published.txt"
hub=${MWRS_TEST_KUBECONFIG:-$(scripts/hub.sh up | tail -n1)}
MWRS_REGISTRY=$registry MWRS_CRANE=$crane MWRS_HELM=$(scripts/helm.sh) MWRS_TEST_KUBECONFIG=$hub \
    cargo test --locked -p mwrs-controller --test published -- --nocapture >&2

# What was checked, for .ci/run (which skips these checks while the inputs are the same);
# commit this file after a run on changed inputs.
cat >.ci/release-check.stamp <<STAMP
# Written by scripts/release-check.sh when it passed; .ci/run reruns the release checks
# when scripts/release-inputs.sh prints another hash.
inputs $(scripts/release-inputs.sh)
checked $(date -u +%Y-%m-%dT%H:%M:%SZ) at commit $commit
STAMP
echo "release-check.sh: passed; recorded in .ci/release-check.stamp" >&2
