// The dashboard page's pure logic: how a view (the JSON `rollout status -o json` prints,
// and the server's live stream) is laid out, filtered and written on screen. Every
// judgement about the rollout (a cluster's cell, whether it needs attention, budgets,
// band progress, the actions that apply) comes computed in the view (`crates/cli/src/
// view.rs`): no rollout rule and no duration parsing here. No DOM and no network either,
// so that `node --test` checks it (view.test.mjs); app.js draws what these return.

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

/** An MWRS row's key in the overview: `namespace/name`. */
export const rowKey = (row) => `${row.namespace}/${row.name}`;

/** What the list page holds of the overview: every MWRS by key. */
export function listFromSnapshot(overview, seq) {
  return { seq, rows: new Map(overview.rows.map((r) => [rowKey(r), r])) };
}

/** The overview after a `change` event: the rows that changed, less those gone. */
export function applyListChange(state, change) {
  const rows = new Map(state.rows);
  for (const r of change.rows) rows.set(rowKey(r), r);
  for (const key of change.removed) rows.delete(key);
  return { seq: change.seq, rows };
}

/** The overview's rows by namespace, then name. */
export function listRows(state) {
  return [...state.rows.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([, r]) => r);
}

/** The overview in a line: how many MWRS, and how many in each state. */
export function listSummary(state) {
  const by = new Map();
  for (const r of state.rows.values()) by.set(r.state, (by.get(r.state) || 0) + 1);
  const states = [...by.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([st, n]) => `${n} ${st}`);
  const n = state.rows.size;
  return `${n} ManifestWorkReplicaSet${n === 1 ? '' : 's'}${states.length ? `: ${states.join(', ')}` : ''}`;
}

const bandOf = (line) => `${line.placement}\u0000${line.group ? line.group.index : 0}\u0000${line.group ? line.group.name : ''}`;

/**
 * What `change` (from `before`) asks of the grid: `{layout: true}` when a cluster came,
 * went or moved to another band (the grid is drawn again), else the clusters whose cell
 * to paint. A cell's meaning comes with its line, so a line that did not change keeps it.
 */
export function repaint(before, change) {
  if (change.removed.length) return { layout: true };
  for (const line of change.clusters) {
    const old = before.clusters.get(line.cluster);
    if (!old || bandOf(old) !== bandOf(line)) return { layout: true };
  }
  return { layout: false, clusters: change.clusters.map((c) => c.cluster) };
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
  for (const line of state.clusters.values()) n[line.cell] += 1;
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
    if (matches(line, f)) out.push({ line, cell: line.cell });
  }
  const rank = (r) => (r.line.attention ? 0 : 1);
  out.sort((a, b) => rank(a) - rank(b) || a.line.cluster.localeCompare(b.line.cluster));
  return out;
}

/** The decision group a filter names a cluster's by: its name, or its index without one. */
export function groupLabel(line) {
  return line.group ? line.group.name || String(line.group.index) : '';
}

/** Do filters `f` keep `line`? */
export function matches(line, f) {
  if (f.state && line.cell !== f.state) return false;
  if (f.group && groupLabel(line) !== f.group) return false;
  if (f.q && !line.cluster.includes(f.q)) return false;
  return !f.attention || line.attention;
}

/** Do filters `f` leave anything out? */
export function filtering(f) {
  return Boolean(f.state || f.group || f.q || f.attention);
}

/**
 * A placementRef's budget line at `now` (ms): the view's text, and how long until the
 * first deadline it names passes. Empty without a budget (an abort going back).
 */
export function budgetText(budget, now) {
  if (!budget) return '';
  if (!budget.nextDeadline) return budget.text;
  const left = Date.parse(budget.nextDeadline) - now;
  return left > 0 ? `${budget.text} (the first passes in ${seconds(Math.ceil(left / 1000))})` : `${budget.text} (passed)`;
}

/** A band's progress from the view: done of how many. */
export function bandProgress(band, header) {
  const b = (header.bands || []).find((x) => x.placement === band.placement && x.group.index === band.index);
  return b ? { done: b.done, of: b.of } : { done: 0, of: band.clusters.length };
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
 * A revision as the header names it: its number, hash and change-cause from `history`
 * (the entries of `rollout history -o json`), or the hash alone while they are unknown.
 */
export function revisionText(hash, history) {
  if (!hash) return '<none>';
  const r = (history || []).find((e) => e.hash === hash);
  if (!r) return hash;
  return `revision ${r.revision} (${hash})${r.changeCause ? `: ${r.changeCause}` : ''}`;
}
