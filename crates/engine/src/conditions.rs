//! Condition bookkeeping with Kubernetes' rules: one condition per type, and
//! `lastTransitionTime` moves only when the status flips, so a pass that changes nothing
//! writes nothing.

use jiff::Timestamp;
use mwrs_api::{Condition, Time};

/// A condition to set: type, status, reason, message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cond {
    pub type_: &'static str,
    pub status: Status,
    pub reason: &'static str,
    pub message: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    True,
    False,
    Unknown,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::True => "True",
            Status::False => "False",
            Status::Unknown => "Unknown",
        }
    }
}

impl Cond {
    pub fn new(
        type_: &'static str,
        status: Status,
        reason: &'static str,
        message: impl Into<String>,
    ) -> Self {
        Self {
            type_,
            status,
            reason,
            message: message.into(),
        }
    }
}

/// The CRD's `maxLength` of a condition message: a longer one makes the whole status
/// write fail (422), so every message is cut to it (rules §12.1).
pub const MESSAGE_MAX: usize = 32 * 1024;

/// Sets `c` in `list`, keeping the old transition time when the status is unchanged.
pub fn set(list: &mut Vec<Condition>, c: &Cond, generation: Option<i64>, now: Timestamp) {
    let status = c.status.as_str();
    let message = || crate::text::cut(c.message.clone(), MESSAGE_MAX);
    match list.iter_mut().find(|old| old.type_ == c.type_) {
        Some(old) => {
            if old.status != status {
                old.status = status.to_string();
                old.last_transition_time = Time(now);
            }
            old.reason = c.reason.to_string();
            old.message = message();
            old.observed_generation = generation;
        }
        None => list.push(Condition {
            type_: c.type_.to_string(),
            status: status.to_string(),
            reason: c.reason.to_string(),
            message: message(),
            observed_generation: generation,
            last_transition_time: Time(now),
        }),
    }
}

pub fn find<'a>(list: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    list.iter().find(|c| c.type_ == type_)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transition_time_moves_only_on_flip() {
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let t1: Timestamp = "2026-01-01T00:01:00Z".parse().unwrap();
        let mut l = Vec::new();
        set(
            &mut l,
            &Cond::new("A", Status::False, "X", "m"),
            Some(1),
            t0,
        );
        set(
            &mut l,
            &Cond::new("A", Status::False, "Y", "n"),
            Some(2),
            t1,
        );
        assert_eq!(l.len(), 1);
        assert_eq!(l[0].last_transition_time.0, t0);
        assert_eq!(l[0].reason, "Y");
        assert_eq!(l[0].observed_generation, Some(2));
        set(&mut l, &Cond::new("A", Status::True, "Z", ""), Some(2), t1);
        assert_eq!(l[0].last_transition_time.0, t1);
    }

    #[test]
    fn a_message_longer_than_the_crd_allows_is_cut() {
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let mut l = Vec::new();
        let long = "x".repeat(40_000);
        set(
            &mut l,
            &Cond::new("A", Status::False, "X", long.clone()),
            None,
            t0,
        );
        assert!(l[0].message.len() <= MESSAGE_MAX, "{}", l[0].message.len());
        set(&mut l, &Cond::new("A", Status::False, "X", long), None, t0);
        assert!(l[0].message.len() <= MESSAGE_MAX, "{}", l[0].message.len());
    }
}
