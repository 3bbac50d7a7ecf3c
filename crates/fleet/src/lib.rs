//! A simulated fleet: the managed clusters' side of a hub, for tests, the demo and
//! benchmarks. It never shares code with the controller, only the API types.
//!
//! - [`agent`]: a work agent answering ManifestWorks in chosen cluster namespaces with
//!   status conditions (Applied, Available, Progressing, Degraded) at the right
//!   generation, after per-cluster delays or failures;
//! - [`placement`]: cluster namespaces, Placements and their PlacementDecisions as OCM's
//!   placement controller would publish them;
//! - [`cluster`]: ManagedClusters and their namespaces, created and removed as one fleet;
//! - [`ocm`]: real clusters for upstream's placement controller and work agents (cluster
//!   set, binding, a Placement with a canary decision group, CEL condition rules);
//! - [`rules`]: which cluster does what with which revision (latency, Degraded, hang, flap).
//!
//! The `mwrs-fleet` binary puts these together for thousands of clusters in one process.

pub mod agent;
pub mod cluster;
pub mod feedback;
pub mod ocm;
pub mod placement;
pub mod rules;

pub use agent::{Agent, AgentConfig, AgentHandle, Behaviour, WorkInfo};
