//! The scenario, one function per step: v1 rolls out; v2 hangs on one decision group and
//! the controller aborts back to v1 by itself; undo rewrites the spec from v1's
//! ControllerRevision; v3 rolls out. Each step waits for its expected state (the hub's,
//! and the spokes' when the clusters are real) and records how it went.

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use kube::api::PostParams;
use mwrs_api::mwrs::{LocalPlacementReference, ManifestWorkReplicaSet, ManifestWorkReplicaSetSpec};
use mwrs_api::work::ManifestWorkTemplate;
use serde_json::json;

use crate::demo::Demo;
use crate::fleet::{BAD_VERSION, MWRS_NAME, PLACEMENT};
use crate::timeline::{Frame, expect_complete};

/// Plays the four steps and prints the history and a summary.
pub async fn play(demo: &mut Demo, deadline_secs: u64) -> anyhow::Result<()> {
    let step_timeout = Duration::from_secs(deadline_secs) * 2 + Duration::from_secs(45);
    let v1 = roll_out_v1(demo, deadline_secs, step_timeout).await?;
    let v2 = abort_v2(demo, &v1, step_timeout).await?;
    undo_to_v1(demo, &v1, step_timeout).await?;
    roll_out_v3(demo, &[&v1, &v2], step_timeout).await?;
    summary(demo).await
}

/// Step 1: create the MWRS with v1; returns v1's revision hash.
async fn roll_out_v1(
    demo: &mut Demo,
    deadline_secs: u64,
    timeout: Duration,
) -> anyhow::Result<String> {
    demo.step_header(
        1,
        "create the MWRS with v1 (ProgressivePerGroup, progressDeadline, AbortAll)",
    );
    let mut strategy = json!({
        "type": "ProgressivePerGroup",
        "progressivePerGroup": {"progressDeadline": format!("{deadline_secs}s")},
        "failureStrategy": "AbortAll",
    });
    if let Some(plugin) = demo.fleet.plugin() {
        strategy["plugin"] = json!(plugin);
    }
    let mwrs = ManifestWorkReplicaSet::new(
        MWRS_NAME,
        ManifestWorkReplicaSetSpec {
            manifest_work_template: ManifestWorkTemplate::from_value(demo.fleet.template("v1"))?,
            placement_refs: vec![LocalPlacementReference {
                name: PLACEMENT.into(),
                rollout_strategy: Some(serde_json::from_value(strategy.clone())?),
            }],
            ..Default::default()
        },
    );
    println!("   rolloutStrategy: {strategy}");
    let t = Instant::now();
    demo.mwrs_api()
        .create(&PostParams::default(), &mwrs)
        .await
        .context("creating the MWRS")?;
    let v1 = wait_new_revision_complete(demo, "v1", &[], timeout).await?;
    demo.record(
        "1 v1 rollout",
        format!("complete, currentRevision=v1 ({v1})"),
        t.elapsed(),
    );
    Ok(v1)
}

/// Waits until a revision other than `old` is the update revision and has rolled out
/// completely as `version`, with Progressing NewRevisionCreated seen on the way.
async fn wait_new_revision_complete(
    demo: &mut Demo,
    version: &str,
    old: &[&str],
    timeout: Duration,
) -> anyhow::Result<String> {
    let n = demo.fleet.clusters().len();
    let mut seen_created = false;
    let mut hash = String::new();
    demo.wait_until(&format!("{version} rollout completes"), timeout, |s| {
        seen_created |= s.has("Progressing", "True", "NewRevisionCreated");
        match s.status().update_revision {
            Some(u) if !old.contains(&u.as_str()) => hash = u,
            _ => return Err("updateRevision not yet the new one".into()),
        }
        expect_complete(s, &hash, version, n)?;
        if !seen_created {
            return Err("complete, but Progressing NewRevisionCreated was never seen".into());
        }
        Ok(())
    })
    .await?;
    demo.names.insert(hash.clone(), version.into());
    Ok(hash)
}

/// Step 2: v2 hangs on one decision group; the controller aborts back to `v1`. Returns
/// v2's revision hash.
async fn abort_v2(demo: &mut Demo, v1: &str, timeout: Duration) -> anyhow::Result<String> {
    let hanging = demo.fleet.hanging_group();
    demo.step_header(
        2,
        &format!(
            "update to {BAD_VERSION}; it never finishes on the {} cluster(s) of group {} \
             ({}): {} -> automatic abort",
            hanging.clusters.len(),
            hanging.name,
            hanging.clusters.join(", "),
            demo.fleet.how_it_hangs(),
        ),
    );
    let t = Instant::now();
    demo.set_template(&demo.fleet.template(BAD_VERSION)).await?;
    let n = demo.fleet.clusters().len();
    let mut seen = AbortSeen::default();
    demo.wait_until("v2 aborts back to v1", timeout, |s| {
        seen.observe(s, v1, t);
        seen.missing(s, v1, n)
    })
    .await?;
    demo.names.insert(seen.v2.clone(), BAD_VERSION.into());
    demo.say(&format!(
        "Progressing reasons seen: {}",
        seen.reasons.join(" -> ")
    ));
    demo.record(
        "2 v2 auto-abort",
        format!(
            "v2 reached {} cluster(s); abortedTime set after {:.1}s ({}); all {n} back on v1",
            seen.max_v2,
            seen.aborted_at.map(|d| d.as_secs_f64()).unwrap_or(0.0),
            seen.trigger,
        ),
        t.elapsed(),
    );
    Ok(seen.v2)
}

/// What step 2 saw on its way to the abort.
#[derive(Default)]
struct AbortSeen {
    v2: String,
    max_v2: usize,
    aborted_at: Option<Duration>,
    reasons: Vec<String>,
    /// `status.lastAbort.trigger`: kept by the controller, so it is there even when the
    /// polls missed the transient Progressing reason that named it.
    trigger: String,
}

impl AbortSeen {
    fn observe(&mut self, s: &Frame, v1: &str, since: Instant) {
        let st = s.status();
        let reason = s.progressing_reason();
        if self.reasons.last() != Some(&reason) {
            self.reasons.push(reason);
        }
        if let Some(u) = &st.update_revision
            && u != v1
        {
            self.v2 = u.clone();
            self.max_v2 = self.max_v2.max(s.count_on(u));
        }
        if st.aborted_time.is_some() && self.aborted_at.is_none() {
            self.aborted_at = Some(since.elapsed());
        }
        if let Some(a) = &st.last_abort {
            self.trigger = a.trigger.clone();
        }
    }

    /// Why the abort back to `v1` is not there yet: v2 reached a cluster, the hold and its
    /// conditions, v1 current, all `n` ManifestWorks and every spoke back on v1.
    fn missing(&self, s: &Frame, v1: &str, n: usize) -> Result<(), String> {
        let st = s.status();
        let mut missing = Vec::new();
        if self.v2.is_empty() {
            missing.push("updateRevision still v1".to_string());
        }
        if self.max_v2 == 0 {
            missing.push("no cluster got v2 yet".into());
        }
        if st.aborted_time.is_none() {
            missing.push("abortedTime not set".into());
        }
        if self.trigger.is_empty() {
            missing.push("lastAbort not recorded".into());
        }
        if !s.has("Progressing", "False", "RolloutAborted") {
            missing.push(format!("Progressing={}", s.progressing_reason()));
        }
        if !s.has("PlacementRolledOut", "False", "RolloutDegraded") {
            missing.push("PlacementRolledOut not RolloutDegraded".into());
        }
        if st.current_revision.as_deref() != Some(v1) {
            missing.push(format!("currentRevision={:?}", st.current_revision));
        }
        if !s.all_done_on(v1, n) {
            missing.push(format!(
                "{} of {n} ManifestWorks back on v1",
                s.count_on(v1)
            ));
        }
        let behind = s.spokes_not_on("v1");
        if !behind.is_empty() {
            missing.push(format!("spokes not back on v1: {}", behind.join(" ")));
        }
        if missing.is_empty() {
            Ok(())
        } else {
            Err(missing.join("; "))
        }
    }
}

/// Step 3: rewrite the spec from v1's ControllerRevision.
async fn undo_to_v1(demo: &mut Demo, v1: &str, timeout: Duration) -> anyhow::Result<()> {
    demo.step_header(3, "undo: rewrite the spec from v1's ControllerRevision");
    let n = demo.fleet.clusters().len();
    let t = Instant::now();
    let (cr_name, cr_rev, data) = demo.revision_template(v1).await?;
    println!("   ControllerRevision {cr_name} (revision {cr_rev}) -> spec.manifestWorkTemplate");
    demo.set_template(&data).await?;
    let mut seen_found = false;
    let already_on_v1 = demo.frame().await?.all_done_on(v1, n);
    demo.wait_until("undo to v1 completes", timeout, |s| {
        seen_found |= s.has("Progressing", "True", "FoundNewRevision");
        expect_complete(s, v1, "v1", n)
    })
    .await?;
    let how = if seen_found {
        "Progressing FoundNewRevision -> complete".to_string()
    } else if already_on_v1 {
        "complete in one pass (every cluster already ran v1 after the abort, so \
         FoundNewRevision had nothing to roll)"
            .to_string()
    } else {
        bail!("undo completed without Progressing FoundNewRevision being seen");
    };
    demo.record(
        "3 undo to v1",
        format!("{how}; currentRevision=updateRevision=v1, hold cleared"),
        t.elapsed(),
    );
    Ok(())
}

/// Step 4: v3 rolls out on every cluster.
async fn roll_out_v3(demo: &mut Demo, old: &[&str], timeout: Duration) -> anyhow::Result<()> {
    demo.step_header(4, "update to v3 (every cluster succeeds)");
    let t = Instant::now();
    demo.set_template(&demo.fleet.template("v3")).await?;
    let v3 = wait_new_revision_complete(demo, "v3", old, timeout).await?;
    demo.record(
        "4 v3 rollout",
        format!("complete, currentRevision=v3 ({v3})"),
        t.elapsed(),
    );
    Ok(())
}

async fn summary(demo: &Demo) -> anyhow::Result<()> {
    println!();
    println!("== revision history (ControllerRevisions owned by {MWRS_NAME})");
    for (rev, name, version) in demo.history().await? {
        println!("   revision {rev:>2}  {name:<24} {version}");
    }
    println!();
    println!("== summary");
    println!("   {:<18} {:>8}  result", "step", "duration");
    for r in &demo.results {
        println!(
            "   {:<18} {:>7.1}s  {}",
            r.name,
            r.took.as_secs_f64(),
            r.outcome
        );
    }
    println!(
        "   {:<18} {:>7.1}s",
        "total",
        demo.start.elapsed().as_secs_f64()
    );
    Ok(())
}
