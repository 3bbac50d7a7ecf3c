//! Stage 3: each desired cluster's status against the target revision, with a success
//! settling, deadlines, soaks and blocked namespaces applied.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde_json::json;

use crate::rollout::RolloutStatus;

use super::super::BlockedWrite;
use super::super::classify::Classified;
use super::{Fixture, Reported, STABLE, mwrs, mwrs_with, secs, t0};

fn classified(f: &Fixture) -> Classified {
    let o = f.observed();
    let pass = f.pass(&o);
    pass.classified(&f.update())
}

/// cluster → (status, since, soak end) of every report.
type Rows = BTreeMap<String, (RolloutStatus, Option<Timestamp>, Option<Timestamp>)>;

fn rows(c: &Classified) -> Rows {
    c.reports
        .iter()
        .map(|r| (r.cluster.to_string(), (r.status, r.since, r.soak_until)))
        .collect()
}

#[test]
fn each_cluster_is_read_against_the_update_revision() {
    let clusters = ["c1", "c2", "c3", "c4", "c5", "c6", "c7"];
    let mut f = Fixture::new(mwrs(Some(STABLE)), &clusters);
    let update = f.store_update();
    f.work("c2", &update, secs(60), Reported::Done);
    f.work("c3", &update, secs(1), Reported::Done);
    f.work("c4", STABLE, secs(600), Reported::Done);
    f.work("c5", &update, secs(60), Reported::Degraded);
    f.work("c7", &update, secs(60), Reported::Nothing);
    f.blocked.push(BlockedWrite {
        cluster: "c6".into(),
        why: "another owner holds ManifestWork app".into(),
    });
    let c = classified(&f);
    let ago = |s| Some(t0() - secs(s));
    use RolloutStatus::*;
    let want: Rows = [
        ("c1", (ToApply, None, None)),
        ("c2", (Succeeded, ago(60), None)),
        // Reported done a second ago: in flight until it has settled.
        ("c3", (Progressing, ago(1), None)),
        ("c4", (ToApply, None, None)),
        ("c5", (Failed, ago(60), None)),
        ("c6", (Failed, None, None)),
        // Written, not answered yet: in flight since the write.
        ("c7", (Progressing, ago(60), None)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(rows(&c), want);
    assert_eq!(
        c.settling,
        Some(t0() + secs(1)),
        "c3 settles 2 s after it was seen"
    );
    let note = |cluster: &str| {
        c.reports
            .iter()
            .find(|r| &*r.cluster == cluster)
            .and_then(|r| r.note.clone())
    };
    assert_eq!(
        note("c6").as_deref(),
        Some("another owner holds ManifestWork app")
    );
    let revision = |cluster: &str| {
        c.reports
            .iter()
            .find(|r| &*r.cluster == cluster)
            .and_then(|r| r.revision.as_deref().map(str::to_string))
    };
    assert_eq!(revision("c4").as_deref(), Some(STABLE));
    assert_eq!(revision("c1"), None);
    assert!(c.verdicts[0].is_some(), "placement p has decisions");
}

#[test]
fn deadlines_and_soaks_apply_to_what_the_agent_reports() {
    let strategy = json!({"type": "Progressive",
        "progressive": {"progressDeadline": "1m", "minSuccessTime": "5m"}});
    let mut f = Fixture::new(mwrs_with(strategy, Some(STABLE)), &["c1", "c2", "c3"]);
    let update = f.store_update();
    f.work("c1", &update, secs(120), Reported::Progressing);
    f.work("c2", &update, secs(60), Reported::Done);
    f.work("c3", &update, secs(30), Reported::Progressing);
    let c = classified(&f);
    let ago = |s| Some(t0() - secs(s));
    use RolloutStatus::*;
    let want: Rows = [
        ("c1", (TimeOut, ago(120), None)),
        ("c2", (Succeeded, ago(60), Some(t0() + secs(240)))),
        ("c3", (Progressing, ago(30), None)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(rows(&c), want);
}

/// Security review W1: while a watch keeps failing the stores may be stale (an agent's
/// report that never arrived), so no deadline runs; once every watch works again, a
/// deadline counts from then at the earliest.
#[test]
fn no_deadline_runs_on_what_the_controller_cannot_see() {
    use crate::plan::Sight;
    let strategy = json!({"type": "All", "all": {"progressDeadline": "1m"}});
    let mut f = Fixture::new(mwrs_with(strategy, Some(STABLE)), &["c1", "c2"]);
    let update = f.store_update();
    f.work("c1", &update, secs(120), Reported::Progressing);
    f.work("c2", &update, secs(30), Reported::Progressing);
    let status_in = |sight| {
        let o = crate::Observed {
            sight,
            ..f.observed()
        };
        let c = f.pass(&o).classified(&f.update());
        let r = rows(&c);
        (r["c1"].0, r["c1"].1, r["c2"].0)
    };
    use RolloutStatus::*;
    assert_eq!(status_in(Sight::Clear).0, TimeOut, "seen all along");
    assert_eq!(status_in(Sight::Blind).0, Progressing, "blind");
    let back = t0() - secs(10);
    assert_eq!(
        status_in(Sight::ClearSince(back)),
        (Progressing, Some(back), Progressing),
        "seen again 10 s ago: the minute counts from then"
    );
}

#[test]
fn a_placement_without_decisions_is_not_evaluated() {
    let mut f = Fixture::new(mwrs(Some(STABLE)), &["c1"]);
    f.placements.clear();
    let c = classified(&f);
    assert!(c.reports.is_empty(), "no cluster is desired");
    assert_eq!(c.verdicts.len(), 1);
    assert!(c.verdicts[0].is_none());
}
