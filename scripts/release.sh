#!/usr/bin/env bash
# Every release artifact from a clone, in target/dist/ (prints the directory):
#   mwrs-controller-<version>.oci.tar      the controller's image (scripts/image.sh)
#   mwrs-feedback-plugin-<version>.oci.tar the reference rollout plugin's image
#   mwrs-controller-<version>.tgz          the Helm chart, packaged (helm from scripts/helm.sh)
#   mwrs-v<version>-linux-{amd64,arm64}.tar.gz (+ .sha256), mwrs.yaml
#                                          the CLI and its krew manifest (scripts/release-cli.sh)
#
#   scripts/release.sh [BASE_URL]          BASE_URL: where the CLI archives will be published
set -euo pipefail
cd "$(dirname "$0")/.."
out=target/dist
# shellcheck source=scripts/release-env.sh
. scripts/release-env.sh
rm -rf "$out" && mkdir -p "$out"
for package in mwrs-controller mwrs-feedback-plugin; do
    cp "$(scripts/image.sh "$package")" "$out/$package-$version.oci.tar"
done
scripts/helm.sh package deploy/helm/mwrs-controller --destination "$out" >&2
cli=$(scripts/release-cli.sh "${1:-file://$PWD/$out}")
cp "$cli"/mwrs-v* "$cli/mwrs.yaml" "$out/"
echo "$PWD/$out"
