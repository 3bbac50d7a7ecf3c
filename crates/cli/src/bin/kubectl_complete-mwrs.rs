//! `kubectl_complete-mwrs`: on PATH beside `kubectl-mwrs`, kubectl runs it to complete
//! `kubectl mwrs ...` (see `mwrs_cli::complete`).

fn main() -> std::process::ExitCode {
    mwrs_cli::complete::main()
}
