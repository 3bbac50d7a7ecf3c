//! The verdict on one cluster, from its ManifestWork as the hub holds it (JSON), the
//! question and `now`: no I/O, so every rule is tested on plain values.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde_json::Value as Json;

use crate::config::{Check, Resource};
use crate::expr::{Outcome, Value};

/// SUCCEEDED, FAILED or IN_PROGRESS, with why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Judged {
    Succeeded(String),
    Failed(String),
    InProgress(String),
}

/// The question, as far as judging goes.
pub struct Asked {
    /// The ManifestWork generation the agent reported done.
    pub generation: i64,
    /// Since when (None: unknown, so no soak can be over).
    pub since: Option<Timestamp>,
}

/// Judges `work` (a ManifestWork) against every check.
pub fn judge(work: &Json, asked: &Asked, checks: &[Check], now: Timestamp) -> Judged {
    let generation = work["metadata"]["generation"].as_i64().unwrap_or(0);
    if generation != asked.generation {
        return Judged::InProgress(format!(
            "the ManifestWork is at generation {generation}, asked about {}",
            asked.generation
        ));
    }
    let mut passed = Vec::new();
    for c in checks {
        let Some(values) = feedback(work, &c.resource) else {
            return Judged::InProgress(format!("{} reports no feedback yet", name(&c.resource)));
        };
        let soak_end = asked.since.and_then(|s| s.checked_add(c.soak).ok());
        let soaked = soak_end.is_some_and(|end| now >= end);
        if soaked && let Some(Outcome::True) = c.fail_when.as_ref().map(|f| f.eval(&values)) {
            let why = format!(
                "{}: {} holds",
                name(&c.resource),
                c.fail_when
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_default()
            );
            return Judged::Failed(why);
        }
        match c.succeed_when.eval(&values) {
            Outcome::True if soaked => {
                passed.push(format!("{}: {}", name(&c.resource), c.succeed_when))
            }
            Outcome::True => {
                let until =
                    soak_end.map_or_else(|| "the agent's report".to_string(), |t| t.to_string());
                return Judged::InProgress(format!("{}: soaking until {until}", name(&c.resource)));
            }
            Outcome::False(why) | Outcome::Unknown(why) => {
                return Judged::InProgress(format!("{}: {why}", name(&c.resource)));
            }
        }
    }
    Judged::Succeeded(passed.join("; "))
}

fn name(r: &Resource) -> String {
    match r.namespace.as_str() {
        "" => format!("{}/{}", r.resource, r.name),
        ns => format!("{}/{ns}/{}", r.resource, r.name),
    }
}

/// The feedback values reported for `r`'s manifest; None when it reports none.
fn feedback(work: &Json, r: &Resource) -> Option<BTreeMap<String, Value>> {
    let manifests = work["status"]["resourceStatus"]["manifests"].as_array()?;
    let m = manifests.iter().find(|m| {
        let meta = &m["resourceMeta"];
        meta["group"].as_str().unwrap_or_default() == r.group
            && meta["resource"] == r.resource.as_str()
            && meta["name"] == r.name.as_str()
            && meta["namespace"].as_str().unwrap_or_default() == r.namespace
    })?;
    let values = m["statusFeedback"]["values"].as_array()?;
    let out: BTreeMap<String, Value> = values
        .iter()
        .filter_map(|v| {
            let name = v["name"].as_str()?.to_string();
            let f = &v["fieldValue"];
            let value = match f["type"].as_str()? {
                "Integer" => Value::Integer(f["integer"].as_i64()?),
                "String" => Value::String(f["string"].as_str()?.to_string()),
                "Boolean" => Value::Boolean(f["boolean"].as_bool()?),
                _ => return None,
            };
            Some((name, value))
        })
        .collect();
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::expr::Expr;
    use jiff::SignedDuration;
    use serde_json::json;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(s).unwrap()
    }

    fn check(soak: i64) -> Check {
        Check {
            resource: Resource {
                group: "apps".into(),
                resource: "deployments".into(),
                namespace: "web".into(),
                name: "web".into(),
            },
            succeed_when: Expr::parse("ReadyReplicas == Replicas").unwrap(),
            fail_when: Some(Expr::parse("ReadyReplicas < 1").unwrap()),
            soak: SignedDuration::from_secs(soak),
        }
    }

    fn work(generation: i64, ready: Option<i64>) -> Json {
        let values: Vec<Json> = ready
            .map(|r| {
                vec![
                    json!({"name": "ReadyReplicas", "fieldValue": {"type": "Integer", "integer": r}}),
                    json!({"name": "Replicas", "fieldValue": {"type": "Integer", "integer": 3}}),
                ]
            })
            .unwrap_or_default();
        json!({
            "metadata": {"generation": generation},
            "status": {"resourceStatus": {"manifests": [{
                "resourceMeta": {"group": "apps", "resource": "deployments",
                    "namespace": "web", "name": "web"},
                "statusFeedback": {"values": values},
            }]}},
        })
    }

    fn asked(since: i64) -> Asked {
        Asked {
            generation: 2,
            since: Some(t(since)),
        }
    }

    #[test]
    fn ready_replicas_held_for_the_soak_succeed() {
        let checks = [check(30)];
        let j = |w: &Json, now| judge(w, &asked(100), &checks, t(now));
        assert!(
            matches!(j(&work(2, Some(3)), 110), Judged::InProgress(m) if m.contains("soaking until"))
        );
        assert!(matches!(j(&work(2, Some(3)), 130), Judged::Succeeded(_)));
        assert!(
            matches!(j(&work(2, Some(2)), 130), Judged::InProgress(m) if m.contains("ReadyReplicas=2"))
        );
    }

    #[test]
    fn a_fail_expression_after_the_soak_fails() {
        let checks = [check(30)];
        let j = |w: &Json, now| judge(w, &asked(100), &checks, t(now));
        assert!(
            matches!(j(&work(2, Some(0)), 110), Judged::InProgress(_)),
            "still soaking"
        );
        assert_eq!(
            j(&work(2, Some(0)), 130),
            Judged::Failed("deployments/web/web: ReadyReplicas < 1 holds".into())
        );
    }

    #[test]
    fn another_generation_or_no_feedback_is_not_judged() {
        let checks = [check(0)];
        assert!(matches!(
            judge(&work(3, Some(3)), &asked(100), &checks, t(200)),
            Judged::InProgress(m) if m.contains("generation 3")
        ));
        assert!(matches!(
            judge(&work(2, None), &asked(100), &checks, t(200)),
            Judged::InProgress(m) if m.contains("no feedback")
        ));
    }
}
