//! Build script of the binaries (controller and CLI): the commit and target they are built
//! for, as `MWRS_COMMIT` and `MWRS_TARGET`, and `MWRS_VERSION` ("0.1.0 (commit c0ffee,
//! x86_64-unknown-linux-musl)") for `--version`, `mwrs version` and the start-up log. The
//! commit is `MWRS_COMMIT` when a release script sets it, else what `git` says of the
//! clone being built, else "unknown" (a source tarball).

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=MWRS_COMMIT");
    let commit = std::env::var("MWRS_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(git_commit)
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=MWRS_COMMIT={commit}");
    let target = std::env::var("TARGET").unwrap_or_else(|_| "unknown".to_string());
    println!("cargo:rustc-env=MWRS_TARGET={target}");
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    println!("cargo:rustc-env=MWRS_VERSION={version} (commit {commit}, {target})");
}

/// The short hash of HEAD; None when there is no git or no repository. (Edits not
/// committed are not told: the release scripts build from a clean clone.)
fn git_commit() -> Option<String> {
    let git_dir = git(&["rev-parse", "--absolute-git-dir"])?;
    // A new commit or checkout moves HEAD or the branch it names.
    // (Only paths that exist: cargo reruns the script on every build for a missing one.)
    for path in ["HEAD", "refs/heads", "packed-refs"] {
        let path = format!("{git_dir}/{path}");
        if std::path::Path::new(&path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    git(&["rev-parse", "--short=12", "HEAD"])
}

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8(out.stdout).ok()?.trim().to_string())
}
