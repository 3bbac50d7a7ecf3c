#!/usr/bin/env bash
# Builds or installs, each into its cache, what the test suite runs besides our own code,
# so that CI can make them while it compiles the workspace (.ci/run starts it in the
# background); scripts/test.sh then finds them made. Every step is the one the suite would
# take itself: it does nothing when its cache holds the result.
#
#   scripts/test-tools.sh             all of them: the test hub and its kubectl, upstream's
#                                     work agent, placement controller and operator, Helm,
#                                     mdBook, and (as root) Chromium
#   scripts/test-tools.sh chromium    Debian's chromium and chromium-driver (as root)
set -euo pipefail
cd "$(dirname "$0")/.."

chromium() {
    command -v chromedriver >/dev/null && return 0
    echo "test-tools.sh: installing chromium and chromium-driver" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >&2 ||
        { apt-get update -qq >&2 &&
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >&2; }
}

case ${1:-all} in
    chromium) chromium ;;
    all)
        scripts/hub.sh build >/dev/null
        scripts/hub.sh kubectl >/dev/null
        for command in work placement registration-operator; do
            bench/peer/build.sh "$command" >/dev/null
        done
        scripts/helm.sh >/dev/null
        scripts/docs.sh install
        if [ "$(id -u)" = 0 ]; then chromium; fi
        ;;
    *)
        echo "usage: scripts/test-tools.sh [all|chromium]" >&2
        exit 2
        ;;
esac
