#!/usr/bin/env bash
# The book (docs/, mdBook): installs mdBook when missing (`cargo install`, pinned, cached in
# ~/.cargo/bin) and builds or serves it.
#
#   scripts/docs.sh build    target/book/ (CI builds it; the links are checked by
#                            crates/cli/tests/docs.rs, which also keeps the generated pages
#                            current)
#   scripts/docs.sh serve    build, serve on http://localhost:3000 and rebuild on change
#   scripts/docs.sh install  only install mdBook (CI does it while other work runs)
set -euo pipefail
cd "$(dirname "$0")/.."
MDBOOK_VERSION=0.5.4

mdbook=${CARGO_HOME:-$HOME/.cargo}/bin/mdbook
if ! "$mdbook" --version 2>/dev/null | grep -qx "mdbook v$MDBOOK_VERSION"; then
    echo "docs.sh: installing mdbook $MDBOOK_VERSION (cargo install, a few minutes once)" >&2
    cargo install mdbook --locked --version "$MDBOOK_VERSION" >&2
fi
case ${1:-build} in
    install) ;;
    build) "$mdbook" build docs ;;
    serve) "$mdbook" serve docs ;;
    *)
        echo "usage: scripts/docs.sh build|serve|install" >&2
        exit 2
        ;;
esac
