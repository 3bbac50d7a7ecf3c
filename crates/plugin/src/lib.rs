//! The rollout plugin API (issue #18, OCM enhancement 231) for Rust: the types, client
//! and server generated from `proto/mwrs/rolloutplugin/v1alpha1/plugin.proto`, the
//! controller's [`client::PluginClient`] (time bounds, retries, TLS) and the
//! `--work-config` file that registers plugins ([`config::WorkConfig`]).

pub mod client;
pub mod config;

/// The generated API, version v1alpha1.
#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod v1alpha1 {
    tonic::include_proto!("mwrs.rolloutplugin.v1alpha1");
}
