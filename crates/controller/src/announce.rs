//! Events about what the controller does, published under the write gate (a replica
//! that cannot prove it leads, or a CRD that cannot hold its state, publishes nothing):
//! one per transition, each with its reason and a note cut to what the API accepts;
//! a failure is logged and counted, never fatal.

use kube::Resource;
use mwrs_api::mwrs::ManifestWorkReplicaSet;
use mwrs_engine::text::prefix;

use crate::context::Context;
use crate::events::EventType;
use crate::plugins::Outlet;

/// Longest Event note the API accepts.
const MAX_NOTE: usize = 1024;

/// Publishes one Event on the MWRS; failures are logged, never fatal.
pub async fn publish(
    ctx: &Context,
    mwrs: &ManifestWorkReplicaSet,
    type_: EventType,
    reason: &str,
    message: &str,
) {
    publish_on(ctx, &mwrs.object_ref(&()), type_, reason, message).await;
}

/// Publishes one Event on the object `regarding`; failures are logged, never fatal.
pub async fn publish_on(
    ctx: &Context,
    regarding: &k8s_openapi::api::core::v1::ObjectReference,
    type_: EventType,
    reason: &str,
    message: &str,
) {
    if !ctx.gate_is_open("create", "event") {
        return;
    }
    publish_fenced(ctx, regarding, type_, reason, message).await;
}

/// Publishes the Event that says the CRD cannot hold this controller's state: fenced by
/// leadership only, since the CRD gate it reports on is closed.
pub async fn publish_crd_state(
    ctx: &Context,
    regarding: &k8s_openapi::api::core::v1::ObjectReference,
    message: &str,
) {
    if !ctx.config.write_gate.is_open() {
        return;
    }
    let reason = "StateFieldsMissing";
    publish_fenced(ctx, regarding, EventType::Warning, reason, message).await;
}

/// Publishes one Event, the caller having checked the gate; failures are logged.
async fn publish_fenced(
    ctx: &Context,
    regarding: &k8s_openapi::api::core::v1::ObjectReference,
    type_: EventType,
    reason: &str,
    message: &str,
) {
    let r = ctx
        .events
        .publish(
            regarding,
            type_,
            prefix(reason, 128),
            prefix(message, MAX_NOTE),
        )
        .await;
    ctx.metrics
        .write("event", "create", if r.is_ok() { "ok" } else { "error" });
    if let Err(e) = r {
        tracing::warn!(error = %e, reason, "cannot publish event");
    }
}

/// The plugin service reports through the context, under the same gate.
impl Outlet for Context {
    fn may_call(&self) -> bool {
        self.gate_is_open("call", "rollout plugin")
    }

    fn may_call_quietly(&self) -> bool {
        self.gate_is_open_quietly()
    }

    fn warn<'a>(
        &'a self,
        regarding: &'a k8s_openapi::api::core::v1::ObjectReference,
        reason: &'a str,
        message: &'a str,
    ) -> futures::future::BoxFuture<'a, ()> {
        Box::pin(publish_on(
            self,
            regarding,
            EventType::Warning,
            reason,
            message,
        ))
    }
}
