//! A simulated fleet: the managed clusters' side of a hub, for tests, the demo and
//! benchmarks. It never shares code with the controller, only the API types.
//!
//! - [`agent`]: a work agent answering ManifestWorks in chosen cluster namespaces with
//!   status conditions (Applied, Available, Progressing, Degraded) at the right
//!   generation, after per-cluster delays or failures;
//! - [`placement`]: cluster namespaces, Placements and their PlacementDecisions as OCM's
//!   placement controller would publish them.

pub mod agent;
pub mod placement;

pub use agent::{Agent, AgentConfig, AgentHandle, Behaviour, WorkInfo};
