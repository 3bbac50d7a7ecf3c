#!/usr/bin/env bash
# Publishes the release artifacts scripts/release.sh wrote to target/dist/ to an OCI
# registry, signs them, and writes what it published to target/dist/published.txt (one
# line each: KIND REPOSITORY DIGEST):
#   REGISTRY/mwrs-controller:<version>              the controller's image index
#   REGISTRY/mwrs-feedback-plugin:<version>         the reference plugin's image index
#   oci://REGISTRY/charts/mwrs-controller <version> the chart
# each signed with cosign (key pair: COSIGN_KEY, a cosign private key file, with
# COSIGN_PASSWORD; without COSIGN_KEY nothing is signed and the script says so), and each
# image's SBOMs attached to it as cosign attestations of type spdxjson.
#
#   scripts/publish.sh REGISTRY [--plain-http]
#
# Credentials are crane's, helm's and cosign's own (`crane auth login`, `helm registry
# login`; cosign reads crane's). --plain-http: a registry without TLS (the local one the
# pipeline's test starts).
set -euo pipefail
cd "$(dirname "$0")/.."
registry=${1:?usage: publish.sh REGISTRY [--plain-http]}
plain=${2:-}
dist=target/dist
# shellcheck source=scripts/release-env.sh
. scripts/release-env.sh
crane=$(scripts/release-tool.sh crane)
crane_flags=() helm_flags=() cosign_flags=()
if [ "$plain" = --plain-http ]; then
    crane_flags=(--insecure) helm_flags=(--plain-http) cosign_flags=(--allow-http-registry --allow-insecure-registry)
fi

published=$dist/published.txt
: >"$published"
for package in mwrs-controller mwrs-feedback-plugin; do
    ref=$registry/$package:$version
    "$crane" "${crane_flags[@]}" push "$dist/$package-$version.oci" "$ref" >&2
    digest=$("$crane" "${crane_flags[@]}" digest "$ref")
    echo "image $registry/$package $digest" >>"$published"
done
chart_out=$(scripts/helm.sh push "$dist/mwrs-controller-$version.tgz" "oci://$registry/charts" \
    "${helm_flags[@]}" 2>&1)
echo "$chart_out" >&2
chart_digest=$(sed -n 's/^Digest: //p' <<<"$chart_out")
[ -n "$chart_digest" ] || { echo "publish.sh: helm push printed no digest" >&2; exit 1; }
echo "chart $registry/charts/mwrs-controller $chart_digest" >>"$published"

if [ -z "${COSIGN_KEY:-}" ]; then
    echo "publish.sh: COSIGN_KEY not set: nothing signed" >&2
else
    cosign=$(scripts/release-tool.sh cosign)
    while read -r kind repository digest; do
        target=$repository@$digest
        "$cosign" sign --yes --key "$COSIGN_KEY" --tlog-upload=false "${cosign_flags[@]}" \
            "$target" >&2
        if [ "$kind" = image ]; then
            package=$(basename "$repository")
            for sbom in "$dist/$package-$version"-linux-*.spdx.json; do
                "$cosign" attest --yes --key "$COSIGN_KEY" --tlog-upload=false \
                    "${cosign_flags[@]}" --type spdxjson --predicate "$sbom" "$target" >&2
            done
        fi
    done <"$published"
fi
cat "$published"
