#!/usr/bin/env bash
# Builds the container image of one of our binaries, with no container engine and no
# image storage but its own output directory.
#
#   scripts/image.sh [PACKAGE [PLATFORMS]]
#       PACKAGE: mwrs-controller (the default) or mwrs-feedback-plugin; PLATFORMS:
#       comma-separated, linux/amd64 (the default) and linux/arm64. Writes the image as an
#       OCI image layout, target/image/PACKAGE/, and as its tar, target/image/PACKAGE.oci.tar
#       (prints that path); push it with `crane push target/image/PACKAGE REGISTRY/...`
#       (scripts/publish.sh) or `skopeo copy oci-archive:... docker://REGISTRY/...`.
#
# The image is one layer holding the static (musl), stripped binary, run as user 65532 with
# no shell (scripts/oci-image.py packs it). Reproducible: paths are remapped, every
# timestamp is the commit's, and the same commit gives the same digests. Installs what it
# needs when missing (Debian's musl-tools, and gcc-aarch64-linux-gnu for arm64; Rust's
# targets). Environment: MWRS_IMAGE_SOURCE (the OCI source label; default: the clone's
# origin remote).
set -euo pipefail
cd "$(dirname "$0")/.."

package=${1:-mwrs-controller}
platforms=${2:-linux/amd64}
case $package in
    mwrs-controller | mwrs-feedback-plugin) ;;
    *) echo "image.sh: no image for package $package" >&2; exit 2 ;;
esac
out=target/image

# shellcheck source=scripts/release-env.sh
. scripts/release-env.sh
need musl-gcc musl-tools
[[ $platforms == *linux/arm64* ]] && need aarch64-linux-gnu-gcc gcc-aarch64-linux-gnu
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
source=${MWRS_IMAGE_SOURCE:-$(git remote get-url origin 2>/dev/null || echo unknown)}

binaries=()
IFS=, read -ra wanted <<<"$platforms"
for platform in "${wanted[@]}"; do
    target=$(rust_target "$platform")
    release_build "$target" "$package"
    binaries+=(--binary "$platform=target/$target/release/$package")
done
mkdir -p "$out"
scripts/oci-image.py --name "$package" --version "$version" --revision "$commit" \
    --created "$created" --source "$source" "${binaries[@]}" \
    --out "$out/$package" --archive "$out/$package.oci.tar" >&2
echo "$PWD/$out/$package.oci.tar"
