//! `mwrs` / `kubectl mwrs`: the command line for ManifestWorkReplicaSet rollouts (rules §7).
//! It reads the same API types and runs the same engine as the controller and never
//! re-implements a rollout rule: per-cluster states come from the planner run on a
//! snapshot read from the hub, and `rollout plan` from the engine's preview.
//!
//! - [`args`]: the command line (clap), its help texts and exit codes;
//! - [`error`]: errors with the exit code they map to;
//! - [`hub`]: connecting (kubeconfig, context, namespace) and reading what belongs to an MWRS;
//! - [`streamed`]: lists decoded while the API server still sends them;
//! - [`watch`]: watches on one MWRS and what it owns, for views that follow a rollout;
//! - [`state`]: the rollout state of an MWRS (the STATUS column) and per-placement progress;
//! - [`view`]: one rollout as every reader shows it (`rollout status`, the dashboard);
//! - [`output`]: tables, colour, ages, YAML and JSON;
//! - [`cmd`]: one module per command;
//! - [`complete`]: completion for `kubectl mwrs` (kubectl's plugin protocol);
//! - [`reference`]: the book's CLI reference page, written from the clap definition.

pub mod args;
pub mod budget;
pub mod cmd;
pub mod complete;
pub mod error;
pub mod hub;
pub mod output;
pub mod reference;
pub mod settings;
pub mod state;
pub mod streamed;
pub mod view;
pub mod watch;

use std::process::ExitCode;

use clap::Parser;

use crate::args::Cli;
use crate::error::{CliError, Exit};

/// Parses the command line, runs the command and turns the outcome into the process exit
/// code (see [`Exit`]).
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse_from(args::argv()) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { Exit::Usage as u8 } else { 0 });
        }
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(Exit::Error as u8);
        }
    };
    let out = output::Out::new(&cli.global);
    match rt.block_on(cmd::run(&cli, &out)) {
        Ok(code) => ExitCode::from(code as u8),
        Err(CliError { code, message }) => {
            eprintln!("{}", out.paint_err(&format!("error: {message}")));
            ExitCode::from(code as u8)
        }
    }
}
