//! Generates the rollout plugin API's types, client and server from `proto/` with protox
//! (a protobuf compiler in Rust: no `protoc` to install).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = "../../proto";
    let file = "mwrs/rolloutplugin/v1alpha1/plugin.proto";
    println!("cargo:rerun-if-changed={root}/{file}");
    let descriptors = protox::compile([file], [root])?;
    tonic_prost_build::configure().compile_fds(descriptors)?;
    Ok(())
}
