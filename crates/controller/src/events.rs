//! Kubernetes Events (events.k8s.io/v1), one object per transition. kube-rs' `Recorder`
//! folds every Event with the same reason on the same object into the first one's series,
//! keeping the first note: a second abort would show the first abort's revisions. A
//! rollout's transitions are few, so each gets its own Event and its own note.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Client;
use kube::api::{Api, PostParams};

/// Warning or Normal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

/// Who reports the Events, and where.
#[derive(Clone)]
pub struct EventSink {
    client: Client,
    controller: String,
    instance: String,
}

impl EventSink {
    pub fn new(client: Client, controller: &str, instance: &str) -> Self {
        Self {
            client,
            controller: controller.to_string(),
            instance: instance.to_string(),
        }
    }

    /// Creates one Event about `regarding` (in its namespace).
    pub async fn publish(
        &self,
        regarding: &ObjectReference,
        type_: EventType,
        reason: &str,
        note: &str,
    ) -> Result<(), kube::Error> {
        let namespace = regarding
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let event = self.event(regarding, type_, reason, note, Timestamp::now());
        Api::<Event>::namespaced(self.client.clone(), &namespace)
            .create(&PostParams::default(), &event)
            .await
            .map(|_| ())
    }

    fn event(
        &self,
        regarding: &ObjectReference,
        type_: EventType,
        reason: &str,
        note: &str,
        now: Timestamp,
    ) -> Event {
        Event {
            metadata: ObjectMeta {
                name: Some(event_name(regarding.name.as_deref().unwrap_or("mwrs"), now)),
                namespace: regarding.namespace.clone(),
                ..Default::default()
            },
            action: Some("Reconcile".into()),
            reason: Some(reason.to_string()),
            note: Some(note.to_string()),
            type_: Some(
                match type_ {
                    EventType::Normal => "Normal",
                    EventType::Warning => "Warning",
                }
                .into(),
            ),
            regarding: Some(regarding.clone()),
            reporting_controller: Some(self.controller.clone()),
            reporting_instance: Some(self.instance.clone()),
            event_time: Some(MicroTime(now)),
            ..Default::default()
        }
    }
}

/// `<regarding>.<nanoseconds in hex>`, as Kubernetes' own recorders name Events; the
/// regarding name is cut so the whole stays a valid object name.
fn event_name(regarding: &str, now: Timestamp) -> String {
    let suffix = format!("{:x}", now.as_nanosecond());
    let room = 253 - suffix.len() - 1;
    let name = mwrs_engine::text::prefix(regarding, room);
    format!("{}.{suffix}", name.trim_end_matches(['-', '.']))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_names_are_valid_and_distinct_in_time() {
        let t: Timestamp = "2026-12-03T10:00:00Z".parse().unwrap_or_default();
        let later = t + jiff::SignedDuration::from_nanos(1);
        assert_ne!(event_name("app", t), event_name("app", later));
        assert!(event_name("app", t).starts_with("app."));
        let long = "a".repeat(300);
        assert!(event_name(&long, t).len() <= 253);
    }
}
