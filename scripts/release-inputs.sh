#!/usr/bin/env bash
# The hash of what the release checks (scripts/release-check.sh) check: whether the images,
# the chart and the CLI archives build for their targets (linux amd64 and arm64 with musl,
# windows) and run there. Their inputs are the release scripts and the image packer, the
# chart and the krew manifest, the toolchain, the lockfile and every manifest (a new or
# changed dependency is where a cross build breaks), and every Rust file that names a
# platform (`cfg(unix)`, `cfg(windows)`, `cfg(target_…)`, `std::os::…`, `libc::`): code
# that is the same on every target cannot build on one and fail on another.
#
#   scripts/release-inputs.sh           prints the hash
#   scripts/release-inputs.sh --files   prints the files hashed
#
# .ci/run runs the release checks only when this hash differs from the one recorded in
# .ci/release-check.stamp by the last passing `scripts/release-check.sh`.
set -euo pipefail
cd "$(dirname "$0")/.."

files() {
    git ls-files -- scripts/release.sh scripts/release-env.sh scripts/release-cli.sh \
        scripts/release-check.sh scripts/release-inputs.sh scripts/image.sh scripts/helm.sh \
        scripts/build-info.rs scripts/wine scripts/oci-image.py scripts/sbom.py \
        scripts/publish.sh scripts/publish-check.sh \
        deploy/krew deploy/helm Cargo.lock '*Cargo.toml' .cargo/config.toml '*build.rs'
    git grep -lE 'cfg\((unix|windows|target_)|std::os::|libc::' -- '*.rs' || true
}

if [ "${1:-}" = --files ]; then
    files | sort -u
    exit 0
fi
{
    rustc --version
    files | sort -u | while read -r f; do
        printf '%s\n' "$f"
        cat "$f"
    done
} | sha256sum | cut -c1-16
