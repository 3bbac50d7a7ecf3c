#!/usr/bin/env bash
# Builds the controller's container image without a Docker engine.
#
#   scripts/image.sh            the image, as an OCI archive: target/image/mwrs-controller.oci.tar
#                               (prints its path); load it with `podman load -i` or push it
#                               with `skopeo copy oci-archive:... docker://REGISTRY/...`
#
# The binary is static (musl), stripped and reproducible: paths are remapped, the image's
# timestamps are the commit's time, and the same commit gives the same image digest.
# Installs what it needs when missing (Debian's buildah and musl-tools, Rust's musl
# target). Environment: MWRS_IMAGE_SOURCE (the OCI source label; default: the clone's
# origin remote), MWRS_IMAGE_NAME (default mwrs-controller).
set -euo pipefail
cd "$(dirname "$0")/.."

target=x86_64-unknown-linux-musl
name=${MWRS_IMAGE_NAME:-mwrs-controller}
out=target/image

need_packages=()
command -v buildah >/dev/null || need_packages+=(buildah)
command -v musl-gcc >/dev/null || need_packages+=(musl-tools)
if ((${#need_packages[@]})); then
    echo "image.sh: installing ${need_packages[*]}" >&2
    if [ "$(id -u)" != 0 ]; then
        echo "image.sh: ${need_packages[*]} missing and not root; install them first" >&2
        exit 1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_packages[@]}" >&2 ||
        { apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_packages[@]}" >&2; }
fi
rustup target list --installed | grep -qx "$target" || rustup target add "$target" >&2

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)
commit=$(git rev-parse --short=12 HEAD)
epoch=$(git log -1 --format=%ct HEAD)
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
source=${MWRS_IMAGE_SOURCE:-$(git remote get-url origin 2>/dev/null || echo unknown)}

# Paths in panics and debug info name the source, not this machine's directories.
export RUSTFLAGS="--remap-path-prefix=$PWD=/src --remap-path-prefix=${CARGO_HOME:-$HOME/.cargo}=/cargo"
export SOURCE_DATE_EPOCH=$epoch MWRS_COMMIT=$commit
cargo build --release --locked --target "$target" -p mwrs-controller \
    --config profile.release.strip=true >&2

context=$(mktemp -d)
trap 'rm -rf "$context"' EXIT
cp "target/$target/release/mwrs-controller" "$context/"
mkdir -p "$out"
# vfs storage and chroot isolation: no overlay filesystem or container runtime needed.
export STORAGE_DRIVER=vfs BUILDAH_ISOLATION=chroot
buildah bud --quiet --layers=false --timestamp "$epoch" \
    --build-arg VERSION="$version" --build-arg REVISION="$commit" \
    --build-arg CREATED="$created" --build-arg SOURCE="$source" \
    -f Containerfile -t "$name:$version" "$context" >&2
rm -f "$out/$name.oci.tar"
buildah push --quiet "$name:$version" "oci-archive:$out/$name.oci.tar:$name:$version" >&2
# The archive is the product; buildah's own copy (vfs: a full copy per build) goes.
buildah rmi "$name:$version" >/dev/null
echo "$PWD/$out/$name.oci.tar"
