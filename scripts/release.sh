#!/usr/bin/env bash
# Every release artifact from a clone, in target/dist/ (prints the directory):
#   mwrs-controller-<version>.oci.tar      the controller's image, linux/amd64 and
#   mwrs-controller-<version>.oci/         linux/arm64 under one index (an OCI archive and
#                                          the same as an OCI image layout)
#   mwrs-feedback-plugin-<version>.oci.tar the reference rollout plugin's image, the same way
#   mwrs-feedback-plugin-<version>.oci/
#   mwrs-controller-<version>.tgz          the Helm chart, packaged (helm from scripts/helm.sh)
#   mwrs-v<version>-{linux-amd64,linux-arm64,windows-amd64}.tar.gz (+ .sha256), mwrs.yaml
#                                          the CLI and its krew manifest (scripts/release-cli.sh)
#   *.spdx.json                            an SPDX SBOM per image platform, CLI archive and
#                                          the chart (scripts/sbom.py)
#   SHA256SUMS                             every file above
#
#   scripts/release.sh [BASE_URL]          BASE_URL: where the CLI archives will be published
#
# Environment: MWRS_PLATFORMS (the images' platforms; default linux/amd64,linux/arm64).
set -euo pipefail
cd "$(dirname "$0")/.."
out=target/dist
# shellcheck source=scripts/release-env.sh
. scripts/release-env.sh
platforms=${MWRS_PLATFORMS:-linux/amd64,linux/arm64}
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
rm -rf "$out" && mkdir -p "$out"
for package in mwrs-controller mwrs-feedback-plugin; do
    archive=$(scripts/image.sh "$package" "$platforms")
    cp "$archive" "$out/$package-$version.oci.tar"
    cp -r "${archive%.oci.tar}" "$out/$package-$version.oci"
    IFS=, read -ra wanted <<<"$platforms"
    for platform in "${wanted[@]}"; do
        scripts/sbom.py binary --package "$package" --target "$(rust_target "$platform")" \
            --artifact "$package-$version-${platform/\//-}" --created "$created" \
            >"$out/$package-$version-${platform/\//-}.spdx.json"
    done
done
scripts/helm.sh package deploy/helm/mwrs-controller --destination "$out" >&2
scripts/sbom.py chart --chart "$out/mwrs-controller-$version.tgz" --created "$created" \
    >"$out/mwrs-controller-$version.tgz.spdx.json"
cli=$(scripts/release-cli.sh "${1:-file://$PWD/$out}")
cp "$cli"/mwrs-v* "$cli/mwrs.yaml" "$out/"
for archive in "$out"/mwrs-v*.tar.gz; do
    name=$(basename "$archive" .tar.gz)
    target=$(rust_target "${name#mwrs-v"$version"-}")
    scripts/sbom.py binary --package mwrs-cli --target "$target" --artifact "$name" \
        --created "$created" >"$out/$name.spdx.json"
done
(cd "$out" && find . -maxdepth 1 -type f ! -name SHA256SUMS ! -name '*.sha256' -printf '%P\n' |
    LC_ALL=C sort | xargs sha256sum >SHA256SUMS)
echo "$PWD/$out"
