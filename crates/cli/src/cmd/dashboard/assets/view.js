// The dashboard page's pure logic: what a view (the JSON `rollout status -o json` prints,
// and the server's live stream) means on screen. No DOM and no network here, so that
// `node --test` checks it (view.test.mjs); app.js draws what these functions return.

/** The colour class of a cluster: where it stands against the revisions in `header`. */
export function cellState(line, header) {
  const aborted = header.state === 'Aborted';
  const stable = header.currentRevision;
  switch (line.state) {
    case 'Failed':
      return 'failed';
    case 'TimeOut':
      return 'timedout';
    case 'Progressing':
      return 'progressing';
    case 'Validating':
      return 'validating';
    case 'Succeeded':
      if (line.soakUntil) return 'soaking';
      // During an abort the target is the stable revision: done there is "back", and
      // done anywhere else still waits for its revert.
      if (aborted) return line.revision === stable ? 'stable' : 'waiting';
      return line.revision !== header.updateRevision ? 'stable' : 'updated';
    default:
      if (!line.revision) return 'none';
      return line.revision === stable ? 'stable' : 'waiting';
  }
}

/** Every cell state, in the order a legend and a summary list them. */
export const STATES = [
  'failed', 'timedout', 'progressing', 'validating', 'soaking',
  'waiting', 'updated', 'stable', 'none',
];

/** What a page holds of one MWRS: the header and the clusters by name. */
export function fromSnapshot(view, seq) {
  const { clusters, ...header } = view;
  return { seq, header, clusters: new Map(clusters.map((c) => [c.cluster, c])) };
}

/**
 * The state after a `change` event: the new header, the clusters that changed, those
 * that went. The server sends each page the changes from the frame that page has.
 */
export function applyChange(state, change) {
  const clusters = new Map(state.clusters);
  for (const c of change.clusters) clusters.set(c.cluster, c);
  for (const name of change.removed) clusters.delete(name);
  return { seq: change.seq, header: change.header, clusters };
}

const bandOf = (line) => `${line.placement}\u0000${line.group ? line.group.index : 0}\u0000${line.group ? line.group.name : ''}`;

/**
 * What `change` (from `before` to `after`) asks of the grid: `{layout: true}` when a
 * cluster came, went or moved to another band (the grid is drawn again), else the
 * clusters whose cell to paint: the ones that changed, or every one when what a cell
 * means moved (the state, a revision, the clusters that set off an abort).
 */
export function repaint(before, after, change) {
  if (change.removed.length) return { layout: true };
  for (const line of change.clusters) {
    const old = before.clusters.get(line.cluster);
    if (!old || bandOf(old) !== bandOf(line)) return { layout: true };
  }
  const [h0, h1] = [before.header, after.header];
  const meaning = (h) => JSON.stringify([h.state, h.currentRevision, h.updateRevision, h.lastAbort || null]);
  if (meaning(h0) !== meaning(h1)) return { layout: false, clusters: [...after.clusters.keys()] };
  return { layout: false, clusters: change.clusters.map((c) => c.cluster) };
}

/** The clusters that set off the abort holding the rollout, as a set (empty without one). */
export function causes(state) {
  const a = state.header.state === 'Aborted' && state.header.lastAbort;
  return new Set(a ? [...(a.failedClusters || []), ...(a.timedOutClusters || [])] : []);
}

/**
 * The grid's bands: one per placement (in the spec's order), then per decision group (in
 * rollout order), each with its clusters by name.
 */
export function bands(state) {
  const order = (state.header.placements || []).map((p) => p.name);
  const byKey = new Map();
  for (const line of state.clusters.values()) {
    const group = line.group || { name: '', index: 0 };
    const key = `${line.placement}\u0000${group.index}`;
    if (!byKey.has(key)) {
      byKey.set(key, { placement: line.placement, group: group.name, index: group.index, clusters: [] });
    }
    byKey.get(key).clusters.push(line.cluster);
  }
  const rank = (p) => {
    const i = order.indexOf(p);
    return i < 0 ? order.length : i;
  };
  const out = [...byKey.values()];
  out.sort((a, b) => rank(a.placement) - rank(b.placement) || a.index - b.index);
  for (const b of out) b.clusters.sort();
  return out;
}

/** Counts of cells by state. */
export function counts(state) {
  const n = Object.fromEntries(STATES.map((s) => [s, 0]));
  for (const line of state.clusters.values()) n[cellState(line, state.header)] += 1;
  return n;
}

/** The text alternative of the grid, in a line. */
export function summary(state) {
  const n = counts(state);
  const total = state.clusters.size;
  const parts = STATES.filter((s) => n[s] > 0).map((s) => `${n[s]} ${LABELS[s]}`);
  const head = `${state.header.name}: ${state.header.state}, ${total} clusters`;
  return parts.length ? `${head}: ${parts.join(', ')}` : head;
}

export const LABELS = {
  failed: 'failed',
  timedout: 'timed out',
  progressing: 'progressing',
  validating: 'validating',
  soaking: 'soaking',
  waiting: 'waiting',
  updated: 'on the update revision',
  stable: 'on the stable revision',
  none: 'without a ManifestWork',
};

/**
 * During an abort: how many clusters are back on the stable revision of how many, and
 * the clusters that set it off.
 */
export function reverting(state) {
  const h = state.header;
  if (h.state !== 'Aborted' || !h.lastAbort) return null;
  let back = 0;
  for (const line of state.clusters.values()) {
    if (line.revision === h.currentRevision && line.state === 'Succeeded') back += 1;
  }
  return { back, of: state.clusters.size, causes: [...causes(state)] };
}

/** Does `line` need attention (failed, timed out, held with a note)? */
export function needsAttention(line, header) {
  const s = cellState(line, header);
  return s === 'failed' || s === 'timedout' || Boolean(line.note);
}

/** The filters a URL hash carries: `#/ns/name?state=failed&group=canary&q=eu-`. */
export function parseFilters(query) {
  const p = new URLSearchParams(query || '');
  return {
    state: p.get('state') || '',
    group: p.get('group') || '',
    q: p.get('q') || '',
    attention: p.get('attention') === '1',
  };
}

export function formatFilters(f) {
  const p = new URLSearchParams();
  if (f.state) p.set('state', f.state);
  if (f.group) p.set('group', f.group);
  if (f.q) p.set('q', f.q);
  if (f.attention) p.set('attention', '1');
  const s = p.toString();
  return s ? `?${s}` : '';
}

/** The rows of the table view under filters `f`: attention first, then by name. */
export function rows(state, f) {
  const out = [];
  for (const line of state.clusters.values()) {
    if (matches(line, state.header, f)) out.push({ line, cell: cellState(line, state.header) });
  }
  const rank = (r) => (needsAttention(r.line, state.header) ? 0 : 1);
  out.sort((a, b) => rank(a) - rank(b) || a.line.cluster.localeCompare(b.line.cluster));
  return out;
}

/** The decision group a filter names a cluster's by: its name, or its index without one. */
export function groupLabel(line) {
  return line.group ? line.group.name || String(line.group.index) : '';
}

/** Do filters `f` keep `line`? */
export function matches(line, header, f) {
  if (f.state && cellState(line, header) !== f.state) return false;
  if (f.group && groupLabel(line) !== f.group) return false;
  if (f.q && !line.cluster.includes(f.q)) return false;
  return !f.attention || needsAttention(line, header);
}

/** Do filters `f` leave anything out? */
export function filtering(f) {
  return Boolean(f.state || f.group || f.q || f.attention);
}

/** A Go duration ("90s", "1m30s", "1h", "250ms") in ms; null for none or "Never". */
export function parseDuration(s) {
  if (!s || s === 'Never') return null;
  const re = /(\d+(?:\.\d+)?)(ms|h|m|s)/gy;
  let total = 0;
  let m;
  let at = 0;
  while ((m = re.exec(s)) !== null) {
    const n = Number(m[1]);
    total += n * { h: 3600000, m: 60000, s: 1000, ms: 1 }[m[2]];
    at = re.lastIndex;
  }
  return at === s.length && at > 0 ? total : null;
}

/**
 * A placementRef's budgets at `now` (ms): its strategy's limits next to what its clusters
 * use of them, and when the first in-flight cluster's deadline passes.
 */
export function budgets(placement, state, now) {
  const st = placement.strategy || {};
  const type = st.type || 'All';
  const key = { All: 'all', Progressive: 'progressive', ProgressivePerGroup: 'progressivePerGroup' }[type];
  const cfg = (key && st[key]) || {};
  const deadline = parseDuration(cfg.progressDeadline);
  let inFlight = 0;
  let next = null;
  for (const line of state.clusters.values()) {
    if (line.placement !== placement.name) continue;
    if (line.state !== 'Progressing' && line.state !== 'Validating') continue;
    inFlight += 1;
    if (deadline !== null && line.since) {
      const at = Date.parse(line.since) + deadline;
      if (next === null || at < next) next = at;
    }
  }
  return {
    type,
    failures: placement.failed + placement.timeOut,
    maxFailures: cfg.maxFailures === undefined ? 0 : cfg.maxFailures,
    inFlight,
    maxConcurrency: cfg.maxConcurrency === undefined ? null : cfg.maxConcurrency,
    progressDeadline: cfg.progressDeadline || null,
    deadlineInMs: next === null ? null : next - now,
    minSuccessTime: cfg.minSuccessTime || null,
  };
}

/** `budgets` in words. */
export function budgetText(b) {
  const parts = [b.type, `failures ${b.failures} of maxFailures ${b.maxFailures}`];
  parts.push(b.maxConcurrency === null ? `${b.inFlight} in flight`
    : `${b.inFlight} in flight of maxConcurrency ${b.maxConcurrency}`);
  if (b.progressDeadline) {
    let d = `progressDeadline ${b.progressDeadline}`;
    if (b.deadlineInMs !== null) {
      d += b.deadlineInMs > 0 ? ` (the first passes in ${Math.ceil(b.deadlineInMs / 1000)}s)` : ' (passed)';
    }
    parts.push(d);
  }
  if (b.minSuccessTime) parts.push(`minSuccessTime ${b.minSuccessTime}`);
  return parts.join(' · ');
}

/**
 * A band's progress: how many of its clusters have reached the target (the update
 * revision; during an abort, the stable revision), of how many.
 */
export function bandProgress(band, state) {
  const target = state.header.state === 'Aborted' ? 'stable' : 'updated';
  let done = 0;
  for (const name of band.clusters) {
    const line = state.clusters.get(name);
    if (line && cellState(line, state.header) === target) done += 1;
  }
  return { done, of: band.clusters.length };
}

/** Seconds as `rollout plan` prints them: 1h2m3s, 45s, 0s. */
export function seconds(n) {
  const s = Math.max(0, Math.floor(n));
  const [h, m, sec] = [Math.floor(s / 3600), Math.floor((s % 3600) / 60), s % 60];
  const out = `${h ? `${h}h` : ''}${m ? `${m}m` : ''}`;
  return sec || !out ? `${out}${sec}s` : out;
}

/** Names, the first `n` of them and how many more: "a, b (+3 more)". */
export function few(names, n) {
  const shown = names.slice(0, n).join(', ');
  return names.length > n ? `${shown} (+${names.length - n} more)` : shown;
}

/** The rows of `rollout plan`'s table, from its JSON. */
export function planRows(plan, names = 6) {
  return plan.waves.map((w) => ({
    wave: w.wave,
    at: `+${seconds(w.atSeconds)}`,
    action: w.action,
    revision: w.revision,
    count: w.clusters.length,
    clusters: few(w.clusters, names),
  }));
}

/**
 * What an action asks before it writes, for mwrs `header`: a title, what it does, and
 * what it writes (the same as the `rollout` command of its name).
 */
export function actionText(action, header) {
  const name = `mwrs/${header.name}`;
  const update = header.updateRevision || '<none>';
  const stable = header.currentRevision || '<none>';
  const annotation = (a) => `It writes the annotation mwrs.rollout.open-cluster-management.io/${a} on ${name}, as you.`;
  switch (action) {
    case 'pause':
      return { title: `Pause ${name}?`, does: 'No cluster starts a new revision until it is resumed; clusters already rolling finish.', writes: annotation('paused') };
    case 'resume':
      return { title: `Resume ${name}?`, does: 'The rollout goes on where it stopped.', writes: `It removes the annotation mwrs.rollout.open-cluster-management.io/paused from ${name}, as you.` };
    case 'abort':
      return { title: `Abort revision ${update} of ${name}?`, does: `Every cluster that got revision ${update} goes back to the stable revision ${stable}, and the rollout stops until a retry or a new template.`, writes: annotation('abort') };
    case 'retry':
      return { title: `Retry revision ${update} of ${name}?`, does: `The abort is lifted and revision ${update} rolls out again from the start of the strategy.`, writes: annotation('retry') };
    case 'undo':
      return { title: `Undo ${name}?`, does: 'The template goes back to the revision chosen below, which then rolls out as a new update.', writes: `It rewrites spec.manifestWorkTemplate of ${name}, as you, only if the spec has not changed since it was read.` };
    default:
      return null;
  }
}

/** The actions that mean something for mwrs `header` now, in the order the page offers them. */
export function actionsFor(header) {
  const out = [header.state === 'Paused' ? 'resume' : 'pause'];
  const rolling = header.updateRevision && header.updateRevision !== header.currentRevision;
  if (rolling && header.state !== 'Aborted') out.push('abort');
  // Degraded covers an abort that failed (AbortFailed) and a rollout a budget stopped.
  if (header.state === 'Aborted' || header.state === 'Degraded') out.push('retry');
  out.push('undo');
  return out;
}

/**
 * A revision as the header names it: its number, hash and change-cause from `history`
 * (the entries of `rollout history -o json`), or the hash alone while they are unknown.
 */
export function revisionText(hash, history) {
  if (!hash) return '<none>';
  const r = (history || []).find((e) => e.hash === hash);
  if (!r) return hash;
  return `revision ${r.revision} (${hash})${r.changeCause ? `: ${r.changeCause}` : ''}`;
}
