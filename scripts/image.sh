#!/usr/bin/env bash
# Builds a container image of one of our binaries without a Docker engine.
#
#   scripts/image.sh [PACKAGE]  the image of PACKAGE (mwrs-controller, the default, or
#                               mwrs-feedback-plugin), as an OCI archive:
#                               target/image/PACKAGE.oci.tar (prints its path); load it with
#                               `podman load -i` or push it with
#                               `skopeo copy oci-archive:... docker://REGISTRY/...`
#
# The binary is static (musl), stripped and reproducible: paths are remapped, the image's
# timestamps are the commit's time, and the same commit gives the same image digest.
# Installs what it needs when missing (Debian's buildah and musl-tools, Rust's musl
# target). Environment: MWRS_IMAGE_SOURCE (the OCI source label; default: the clone's
# origin remote), MWRS_IMAGE_NAME (default: PACKAGE).
set -euo pipefail
cd "$(dirname "$0")/.."

target=x86_64-unknown-linux-musl
package=${1:-mwrs-controller}
case $package in
    mwrs-controller) containerfile=Containerfile ;;
    mwrs-feedback-plugin) containerfile=Containerfile.feedback-plugin ;;
    *) echo "image.sh: no image for package $package" >&2; exit 2 ;;
esac
name=${MWRS_IMAGE_NAME:-$package}
out=target/image

# shellcheck source=scripts/release-env.sh
. scripts/release-env.sh
need buildah buildah musl-gcc musl-tools
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
source=${MWRS_IMAGE_SOURCE:-$(git remote get-url origin 2>/dev/null || echo unknown)}
release_build "$target" "$package"

context=$(mktemp -d)
trap 'rm -rf "$context"' EXIT
cp "target/$target/release/$package" "$context/"
mkdir -p "$out"
# vfs storage and chroot isolation: no overlay filesystem or container runtime needed.
export STORAGE_DRIVER=vfs BUILDAH_ISOLATION=chroot
buildah bud --quiet --layers=false --timestamp "$epoch" \
    --build-arg VERSION="$version" --build-arg REVISION="$commit" \
    --build-arg CREATED="$created" --build-arg SOURCE="$source" \
    -f "$containerfile" -t "$name:$version" "$context" >&2
rm -f "$out/$name.oci.tar"
buildah push --quiet "$name:$version" "oci-archive:$out/$name.oci.tar:$name:$version" >&2
# The archive is the product; buildah's own copy (vfs: a full copy per build) goes.
buildah rmi "$name:$version" >/dev/null
echo "$PWD/$out/$name.oci.tar"
