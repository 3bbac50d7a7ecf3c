//! `kubectl-mwrs`: on PATH it makes `kubectl mwrs ...` work; identical to `mwrs`.

fn main() -> std::process::ExitCode {
    mwrs_cli::main()
}
