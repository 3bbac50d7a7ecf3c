//! One module per command; [`run`] dispatches.

pub mod control;
pub mod dashboard;
pub mod diff;
pub mod get;
pub mod handover;
pub mod history;
pub mod plan;
pub mod plugin;
pub mod status;
pub mod undo;
pub mod upstream;

use clap::CommandFactory;

use crate::args::{Cli, Command, PluginCommand, Rollout, VERSION};
use crate::error::{Exit, Result};
use crate::hub::HubClient;
use crate::output::Out;

/// Runs the command; Ok carries the exit code of a command that ran to its end.
pub async fn run(cli: &Cli, out: &Out) -> Result<Exit> {
    let g = &cli.global;
    match &cli.command {
        Command::Completion { shell } => {
            let mut cmd = Cli::command();
            let name = cmd.get_name().to_string();
            clap_complete::generate(*shell, &mut cmd, name, &mut std::io::stdout());
            Ok(Exit::Ok)
        }
        Command::Version => {
            if out.structured() {
                out.print_structured(&serde_json::json!({"version": env!("CARGO_PKG_VERSION"),
                    "commit": env!("MWRS_COMMIT"), "target": env!("MWRS_TARGET")}))?;
            } else {
                println!("mwrs {VERSION}");
            }
            Ok(Exit::Ok)
        }
        Command::Get(a) => get::run(&HubClient::connect(g, false).await?, g, out, a).await,
        Command::Handover(a) => handover::run(&HubClient::connect(g, false).await?, g, a).await,
        Command::DisableUpstream(a) => upstream::run(&HubClient::connect(g, false).await?, a).await,
        Command::Dashboard(a) => dashboard::run(HubClient::connect(g, false).await?, g, a).await,
        Command::Plugin {
            command: PluginCommand::Check(a),
        } => plugin::run(out, a).await,
        Command::Rollout { command } => {
            let watch = matches!(command, Rollout::Status(s) if s.watch);
            let hub = HubClient::connect(g, watch).await?;
            match command {
                Rollout::Status(a) => status::run(&hub, out, a).await,
                Rollout::History(a) => history::run(&hub, out, a).await,
                Rollout::Diff(a) => diff::run(&hub, out, a).await,
                Rollout::Undo(a) => undo::run(&hub, out, a).await,
                Rollout::Abort(a) => Ok(control::abort(&hub, &a.name, None).await?.print(out)),
                Rollout::Retry(a) => {
                    let done = control::retry(&hub, &a.name, None, a.skip_plugins).await?;
                    Ok(done.print(out))
                }
                Rollout::Pause(a) => Ok(control::pause(&hub, &a.name, true).await?.print(out)),
                Rollout::Resume(a) => Ok(control::pause(&hub, &a.name, false).await?.print(out)),
                Rollout::Plan(a) => plan::run(&hub, out, a).await,
            }
        }
    }
}
