# Sourced by the release scripts (image.sh, release-cli.sh, release.sh, release-check.sh),
# from the repository's root: what every release build shares.
#
#   version, commit, epoch     the crate version, HEAD's short hash, HEAD's commit time
#   release_build TARGET PKG   a stripped, reproducible release build of PKG (static for
#                              the musl targets): paths
#                              remapped, the commit and SOURCE_DATE_EPOCH from HEAD
#   need COMMAND PACKAGE ...   installs each missing COMMAND's Debian PACKAGE (as root)
#   rust_target PLATFORM       the Rust target of linux/amd64, linux/arm64 or windows/amd64
#                              (also written with '-': linux-amd64 ...)

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)
commit=$(git rev-parse --short=12 HEAD)
epoch=$(git log -1 --format=%ct HEAD)

need() {
    local missing=()
    while (($#)); do
        command -v "$1" >/dev/null || missing+=("$2")
        shift 2
    done
    ((${#missing[@]})) || return 0
    echo "$(basename "$0"): installing ${missing[*]}" >&2
    if [ "$(id -u)" != 0 ]; then
        echo "$(basename "$0"): ${missing[*]} missing and not root; install them first" >&2
        return 1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2 ||
        { apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2; }
}

release_build() {
    local target=$1 package=$2
    rustup target list --installed | grep -qx "$target" || rustup target add "$target" >&2
    # Paths in panics and debug info name the source, not this machine's directories.
    RUSTFLAGS="--remap-path-prefix=$PWD=/src --remap-path-prefix=${CARGO_HOME:-$HOME/.cargo}=/cargo" \
        SOURCE_DATE_EPOCH=$epoch MWRS_COMMIT=$commit \
        cargo build --release --locked --target "$target" -p "$package" \
        --config profile.release.strip=true >&2
}

# The cross C compiler builds ring's C and assembly; it also links, with Rust's own musl
# (the target's self-contained C runtime).
export CC_aarch64_unknown_linux_musl=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_LINKER=aarch64-linux-gnu-gcc
export CC_x86_64_pc_windows_gnu=x86_64-w64-mingw32-gcc
export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER=x86_64-w64-mingw32-gcc

rust_target() {
    case ${1/\//-} in
        linux-amd64) echo x86_64-unknown-linux-musl ;;
        linux-arm64) echo aarch64-unknown-linux-musl ;;
        windows-amd64) echo x86_64-pc-windows-gnu ;;
        *) echo "$(basename "$0"): no build for platform $1" >&2; return 2 ;;
    esac
}
