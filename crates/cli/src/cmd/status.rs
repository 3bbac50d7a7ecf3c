//! `rollout status NAME [-w] [--timeout D] [--clusters N|all]`: progress per placement and
//! per cluster, classified by the engine's planner stages on what the hub shows (so it says
//! exactly what the controller sees), without planning any write. With `-w` it keeps
//! reflectors (watches) on the MWRS, its ManifestWorks, revisions, Placements and
//! decisions, and redraws on every change until the rollout ends or the timeout passes.

use std::time::{Duration, Instant};

use jiff::Timestamp;
use kube::ResourceExt;
use mwrs_api::mwrs::ManifestWorkReplicaSet;
use mwrs_engine::phase::Phase;

use crate::args::StatusArgs;
use crate::error::{CliError, Exit, Result};
use crate::hub::{HubClient, parse_timeout};
use crate::output::{Out, Paint, Table, age, bar, paint_state};
use crate::settings::Judging;
use crate::state::abort_line;
use crate::view::{ClusterLine, View};
use crate::watch::MwrsWatch;

/// Most redraws per second on a terminal.
const REDRAW_EVERY: Duration = Duration::from_millis(250);

/// How many cluster lines to print.
fn parse_limit(s: &str) -> Result<Option<usize>> {
    if s == "all" {
        return Ok(None);
    }
    s.parse()
        .map(Some)
        .map_err(|_| CliError::usage(format!("--clusters {s:?}: a number or `all`")))
}

/// The exit code a state ends the command with.
pub fn exit_of(s: Phase) -> Exit {
    match s {
        Phase::Aborted => Exit::Aborted,
        Phase::Degraded | Phase::Invalid => Exit::Degraded,
        Phase::Paused | Phase::Blocked => Exit::Blocked,
        _ => Exit::Ok,
    }
}

pub async fn run(hub: &HubClient, out: &Out, a: &StatusArgs) -> Result<Exit> {
    let limit = parse_limit(&a.clusters)?;
    let timeout = parse_timeout(&a.timeout, "--timeout")?;
    if !a.watch {
        let (_, read) = hub.read(&a.name).await?;
        let judging = Judging::read(&hub.client, &a.controller).await;
        let view = View::of(
            &read.snapshot,
            read.works_hidden.as_deref(),
            Timestamp::now(),
            &judging,
        );
        if out.structured() {
            out.print_structured(&view)?;
        } else {
            print!("{}", render(out, &view, limit, Timestamp::now()));
        }
        return Ok(exit_of(view.state));
    }
    let m = hub.get(&a.name).await?;
    let judging = Judging::read(&hub.client, &a.controller).await;
    watch(hub, out, &m, (limit, timeout), &judging).await
}

/// Renders the view as text.
pub fn render(out: &Out, v: &View, limit: Option<usize>, now: Timestamp) -> String {
    let mut s = render_header(out, v, now);
    s.push_str(&render_placements(out, v, now));
    s.push_str(&render_clusters(out, v, limit, now));
    s
}

/// The MWRS's line, its revisions, its last abort and what holds or judges it.
fn render_header(out: &Out, v: &View, now: Timestamp) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "{}  {}  {}\n",
        out.paint(Paint::Bold, &format!("mwrs/{}", v.name)),
        paint_state(out, v.state.as_str()),
        v.message
    ));
    s.push_str(&format!(
        "revisions: current {}, update {}\n",
        v.current_revision.as_deref().unwrap_or("<none>"),
        v.update_revision.as_deref().unwrap_or("<none>")
    ));
    if let Some(a) = &v.last_abort {
        s.push_str(&format!("last abort: {}\n", abort_line(a, now)));
    }
    if let Some(note) = &v.note {
        s.push_str(&format!("{note}\n"));
    }
    if let Some(plugins) = &v.plugins {
        s.push_str(&format!("plugins: {plugins}\n"));
    }
    s.push_str(&format!("{}\n", out.paint(Paint::Dim, &v.judged_with)));
    s.push('\n');
    s
}

/// The table of placements and each one's budget line.
fn render_placements(out: &Out, v: &View, now: Timestamp) -> String {
    let mut s = String::new();
    // The VALIDATING column only where a rollout plugin judges clusters.
    let validating = v.placements.iter().any(|p| p.validating > 0);
    let mut head = vec!["PLACEMENT", "PROGRESS", "DONE", "PROGRESSING"];
    if validating {
        head.push("VALIDATING");
    }
    head.extend(["TOAPPLY", "FAILED", "TIMEOUT"]);
    let mut t = Table::new(&head);
    for p in &v.placements {
        let mut row = vec![
            p.name.clone(),
            out.paint(
                if p.failed + p.time_out > 0 {
                    Paint::Red
                } else if p.done == p.desired {
                    Paint::Green
                } else {
                    Paint::Yellow
                },
                &bar(p.done, p.desired, 20),
            ),
            format!("{}/{}", p.done, p.desired),
            p.progressing.to_string(),
        ];
        if validating {
            row.push(p.validating.to_string());
        }
        row.extend([
            p.to_apply.to_string(),
            p.failed.to_string(),
            p.time_out.to_string(),
        ]);
        t.row(row);
    }
    s.push_str(&t.render());
    for p in &v.placements {
        if let Some(b) = &p.budget {
            s.push_str(&format!("budget {}: {}\n", p.name, b.at(now)));
        }
    }
    s
}

/// The clusters, attention first, at most `limit` of them.
fn render_clusters(out: &Out, v: &View, limit: Option<usize>, now: Timestamp) -> String {
    let mut s = String::new();
    let shown = limit.unwrap_or(usize::MAX).min(v.clusters.len());
    if shown > 0 {
        s.push('\n');
        // The NOTE column (the agent's apply error, its silence) only when there is one.
        let noted = v.clusters[..shown].iter().any(|c| c.note.is_some());
        let mut head = vec!["CLUSTER", "PLACEMENT", "REVISION", "STATE", "SINCE"];
        if noted {
            head.push("NOTE");
        }
        let mut t = Table::new(&head);
        for c in &v.clusters[..shown] {
            let state = match c.soak_until {
                Some(until) => format!(
                    "{} (soaking, {} left)",
                    paint_state(out, &c.state),
                    age(Some(now), until)
                ),
                None => paint_state(out, &c.state),
            };
            let mut row = vec![
                c.cluster.clone(),
                c.placement.clone(),
                c.revision.clone().unwrap_or_else(|| "<none>".into()),
                state,
                c.since.map_or_else(|| "-".into(), |t| age(Some(t), now)),
            ];
            if noted {
                row.push(c.note.clone().unwrap_or_default());
            }
            t.row(row);
        }
        s.push_str(&t.render());
    }
    if shown < v.clusters.len() {
        s.push_str(&format!(
            "... {} more clusters (--clusters all lists them)\n",
            v.clusters.len() - shown
        ));
    }
    s
}

/// Plain lines for a non-terminal: what changed between two views.
fn changes(prev: Option<&View>, v: &View) -> Vec<String> {
    let mut lines = Vec::new();
    let head = |v: &View| format!("mwrs/{}: {}: {}", v.name, v.state.as_str(), v.message);
    if prev.is_none_or(|p| head(p) != head(v)) {
        lines.push(head(v));
    }
    if let (None, Some(note)) = (prev, &v.note) {
        lines.push(note.clone());
    }
    for p in &v.placements {
        let validating = match p.validating {
            0 => String::new(),
            n => format!(", {n} validating"),
        };
        let line = format!(
            "placement {}: {}/{} done, {} progressing{validating}, {} to apply, {} failed, {} timed out",
            p.name, p.done, p.desired, p.progressing, p.to_apply, p.failed, p.time_out
        );
        let old = prev.and_then(|o| o.placements.iter().find(|x| x.name == p.name));
        if old != Some(p) {
            lines.push(line);
        }
    }
    for c in &v.clusters {
        let old = prev.and_then(|o| o.clusters.iter().find(|x| x.cluster == c.cluster));
        let key = |c: &ClusterLine| (c.revision.clone(), c.state.clone(), c.note.clone());
        if old.map(key) != Some(key(c)) {
            lines.push(format!(
                "cluster {}: {} on {}{}",
                c.cluster,
                c.state,
                c.revision.as_deref().unwrap_or("<none>"),
                c.note
                    .as_deref()
                    .map(|n| format!(" ({n})"))
                    .unwrap_or_default()
            ));
        }
    }
    lines
}

async fn watch(
    hub: &HubClient,
    out: &Out,
    m: &ManifestWorkReplicaSet,
    (limit, timeout): (Option<usize>, Option<Duration>),
    judging: &Judging,
) -> Result<Exit> {
    let deadline = timeout.map(|t| Instant::now() + t);
    let name = m.name_any();
    let (stores, mut rx) = MwrsWatch::start(hub, m).await?;
    let remaining = |d: Option<Instant>| d.map(|d| d.saturating_duration_since(Instant::now()));
    let ready = match remaining(deadline) {
        Some(r) => tokio::time::timeout(r, stores.ready()).await.ok(),
        None => Some(stores.ready().await),
    };
    if ready != Some(true) {
        return Err(CliError::new(
            Exit::Timeout,
            format!("timed out reading mwrs/{name} from the hub"),
        ));
    }
    let mut prev: Option<View> = None;
    let mut drawn_lines = 0usize;
    let mut unobserved = Unobserved::default();
    loop {
        // Drain what arrived meanwhile: one redraw serves a burst of events.
        while rx.try_recv().is_ok() {}
        let Some(snap) = stores.snapshot() else {
            return Err(CliError::not_found(format!(
                "manifestworkreplicaset {name:?} was deleted"
            )));
        };
        let now = Timestamp::now();
        let hint_in = unobserved.follow(&snap.mwrs);
        let view = View::of(&snap, stores.works_hidden.as_deref(), now, judging);
        drawn_lines = draw(out, (prev.as_ref(), &view), limit, now, drawn_lines)?;
        let st = view.state;
        // An abort is followed until the revert is done: every cluster back on the
        // stable revision.
        let reverted = view.placements.iter().all(|p| p.done == p.desired);
        prev = Some(view);
        if st.is_final() && (st != Phase::Aborted || reverted) {
            return Ok(exit_of(st));
        }
        // Wait for the next event; on a terminal also tick once a second so ages move.
        let tick = if out.tty {
            Duration::from_secs(1)
        } else {
            Duration::from_secs(3600)
        };
        let tick = hint_in.map_or(tick, |h| tick.min(h));
        let wait = match remaining(deadline) {
            Some(r) if r.is_zero() => return timed_out(&name),
            Some(r) => r.min(tick),
            None => tick,
        };
        match tokio::time::timeout(wait, rx.recv()).await {
            Ok(Some(())) => {
                tokio::time::sleep(REDRAW_EVERY.min(remaining(deadline).unwrap_or(REDRAW_EVERY)))
                    .await
            }
            Ok(None) => {
                return Err(CliError::error("lost the watches on the hub"));
            }
            Err(_) => {}
        }
        if remaining(deadline).is_some_and(|r| r.is_zero()) {
            return timed_out(&name);
        }
    }
}

/// Shows `view` as `out` asks: a structured document when it changed, the whole frame
/// drawn over the last one on a terminal (`drawn_lines` long), or the lines that changed
/// since `prev`. Returns how many lines the terminal now shows.
fn draw(
    out: &Out,
    (prev, view): (Option<&View>, &View),
    limit: Option<usize>,
    now: Timestamp,
    drawn_lines: usize,
) -> Result<usize> {
    if out.structured() {
        if prev != Some(view) {
            out.print_structured(view)?;
            if out.format == crate::args::Format::Yaml {
                println!("---");
            }
        }
        return Ok(drawn_lines);
    }
    if out.tty {
        let text = render(out, view, limit, now);
        // Back to the top of the previous frame and clear it, then draw.
        if drawn_lines > 0 {
            print!("\x1b[{drawn_lines}A\x1b[J");
        }
        print!("{text}");
        return Ok(text.lines().count());
    }
    for line in changes(prev, view) {
        println!("{line}");
    }
    Ok(drawn_lines)
}

/// How long `-w` follows a status no controller has caught up with before it says why
/// that can last.
const UNOBSERVED_HINT_AFTER: Duration = Duration::from_secs(20);

/// Since when the followed MWRS's spec has been newer than its status, and whether the
/// hint was given for that stretch.
#[derive(Default)]
struct Unobserved {
    since: Option<Instant>,
    said: bool,
}

impl Unobserved {
    /// Follows `m`; prints the hint once a stretch has lasted [`UNOBSERVED_HINT_AFTER`].
    /// Returns how long until the hint is due, while it is.
    fn follow(&mut self, m: &ManifestWorkReplicaSet) -> Option<Duration> {
        let Some((seen, generation)) = unobserved_generation(m) else {
            *self = Self::default();
            return None;
        };
        let since = *self.since.get_or_insert_with(Instant::now);
        if self.said {
            return None;
        }
        let waited = since.elapsed();
        if waited < UNOBSERVED_HINT_AFTER {
            return Some(UNOBSERVED_HINT_AFTER - waited);
        }
        self.said = true;
        eprintln!(
            "{}",
            unobserved_hint(&m.name_any(), seen, generation, waited)
        );
        None
    }
}

/// The status's generation and the spec's, while the status is older.
fn unobserved_generation(m: &ManifestWorkReplicaSet) -> Option<(i64, i64)> {
    let seen = m.status.as_ref()?.observed_generation?;
    let generation = m.metadata.generation?;
    (seen < generation).then_some((seen, generation))
}

fn unobserved_hint(name: &str, seen: i64, generation: i64, waited: Duration) -> String {
    format!(
        "note: no controller has written the status of mwrs/{name} for generation \
         {generation} in {}s (the status is of generation {seen}). This controller may be \
         stopped, or not handle this namespace (--namespace); an MWRS handed over to \
         upstream's controller (kubectl mwrs handover) stays so, since upstream writes no \
         observedGeneration: read its conditions with `kubectl get mwrs {name} -o yaml`.",
        waited.as_secs()
    )
}

fn timed_out(name: &str) -> Result<Exit> {
    Err(CliError::new(
        Exit::Timeout,
        format!("timed out waiting for the rollout of mwrs/{name} to end"),
    ))
}
