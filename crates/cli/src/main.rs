//! The `mwrs` binary; `kubectl-mwrs` (src/bin) is the same program under kubectl's
//! plugin name.

fn main() -> std::process::ExitCode {
    mwrs_cli::main()
}
