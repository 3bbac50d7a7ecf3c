//! The ManifestWorkReplicaSet hub controller runtime: it watches the hub, hands one MWRS
//! at a time to the pure planner (`mwrs_engine::plan`) and carries out the plan's writes.
//! It holds no rollout logic of its own.
//!
//! - [`watch`]: reflectors and trigger streams (MWRS, ManifestWorks, ControllerRevisions,
//!   Placements, PlacementDecisions) and the mappers from each to its MWRS; ManifestWorks
//!   are decoded as `mwrs_engine::stored_work::StoredWork` (no manifests, ever);
//! - [`store_view`]: the planner's input for one MWRS, read from the stores only;
//! - [`index`]: owner → owned objects, kept from the watch events (O(own) snapshots);
//! - [`changes`]: when ManifestWork conditions and placement decisions last changed;
//! - [`execute`]: the plan's writes (finalizer, revisions, ManifestWorks, status), each
//!   asking the write gate first (`Context::may_write`);
//! - [`announce`]: the Events about what it does, under the same gate;
//! - [`events`]: Kubernetes Events, one per transition (never folded into a series);
//! - [`unreadable`]: reporting an MWRS our types cannot read, without stopping the others;
//! - [`reconcile`]: the reconciler and error policy wiring the above together;
//! - [`queue_delay`], [`api_requests`]: what the queue and the hub cost, measured;
//! - [`metrics`], [`http`]: Prometheus metrics and the `/metrics`, `/healthz`, `/readyz` server;
//! - [`tls`], [`access`]: its serving certificate, and who may read `/metrics` (TokenReview,
//!   SubjectAccessReview);
//! - [`crd`]: the watch that the installed CRD keeps carrying this project's fields;
//! - [`leader`]: leader election on a Lease;
//! - [`silence`]: how long a connection to the hub may stay silent before it counts as dead;
//! - [`plugins`]: rollout plugins (`--work-config`): their health and verdicts, and the
//!   calls a plan asks for.

pub mod access;
pub mod announce;
pub mod api_requests;
pub mod changes;
pub mod context;
pub mod crd;
pub mod error;
pub mod events;
pub mod execute;
pub mod http;
pub mod index;
pub mod leader;
pub mod lease;
pub mod mark_key;
pub mod metrics;
pub mod patch;
pub mod plugins;
pub mod queue_delay;
pub mod reconcile;
pub mod silence;
pub mod store_view;
pub mod tls;
pub mod unreadable;
pub mod watch;
pub mod watch_health;
pub mod work_cache;

pub use context::{Config, Context, Shared};
pub use error::Error;
pub use reconcile::{error_policy, reconcile, run};

/// Field manager of every write this controller makes.
pub const FIELD_MANAGER: &str = "mwrs-controller";
