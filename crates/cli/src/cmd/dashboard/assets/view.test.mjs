// node --test crates/cli/src/cmd/dashboard/assets/
import { test } from 'node:test';
import assert from 'node:assert/strict';
// Drawing, filtering and URL state only: every judgement about the rollout (cells,
// attention, budgets, band progress, actions) comes computed in the view and is tested in
// Rust (crates/cli/src/view.rs, the engine's plan/tests/budget.rs).
import {
  applyChange, applyListChange, listFromSnapshot, listRows, listSummary, bandProgress, bands, budgetText, counts,
  filtering, formatFilters, fromSnapshot, groupLabel, matches, parseFilters, planRows, repaint, revisionText, rows, seconds,
  summary,
} from './view.js';

const header = {
  name: 'app', namespace: 'ns', state: 'Progressing', message: '',
  currentRevision: 'v1', updateRevision: 'v2',
  placements: [{ name: 'canary' }, { name: 'fleet' }],
};

// The cell the view computes for each state in these fixtures.
const CELLS = {
  Succeeded: 'updated', ToApply: 'stable', Progressing: 'progressing', Failed: 'failed', TimeOut: 'timedout',
};

const line = (cluster, state, revision, extra = {}) => ({
  cluster, placement: 'fleet', group: { name: 'g', index: 0 }, revision, state, since: null,
  cell: CELLS[state], attention: state === 'Failed' || state === 'TimeOut' || Boolean(extra.note), cause: false,
  ...extra,
});

test('a change replaces the header, the clusters that changed, and drops those gone', () => {
  const s0 = fromSnapshot({ ...header, clusters: [line('a', 'ToApply', 'v1'), line('b', 'ToApply', 'v1')] }, 4);
  const s1 = applyChange(s0, {
    seq: 5, header: { ...header, message: 'going' },
    clusters: [line('a', 'Progressing', 'v2')], removed: ['b'],
  });
  assert.equal(s1.seq, 5);
  assert.equal(s1.header.message, 'going');
  assert.deepEqual([...s1.clusters.keys()], ['a']);
  assert.equal(s0.clusters.size, 2, 'the old state is left as it was');
});

test('a change repaints the cells it touched, or the layout', () => {
  const s0 = fromSnapshot({ ...header, clusters: [line('a', 'ToApply', 'v1'), line('b', 'ToApply', 'v1')] }, 1);
  const step = (h, clusters, removed = []) => ({ seq: 2, header: h, clusters, removed });
  const moved = step(header, [line('a', 'Progressing', 'v2')]);
  assert.deepEqual(repaint(s0, moved), { layout: false, clusters: ['a'] });
  for (const layout of [
    step(header, [], ['b']),
    step(header, [line('c', 'ToApply', 'v1')]),
    step(header, [line('a', 'ToApply', 'v1', { group: { name: 'h', index: 1 } })]),
  ]) {
    assert.deepEqual(repaint(s0, layout), { layout: true });
  }
});

test('bands follow the placements, then the decision groups in rollout order', () => {
  const s = fromSnapshot({
    ...header,
    clusters: [
      line('f2', 'ToApply', 'v1', { group: { name: 'wave-2', index: 2 } }),
      line('f1', 'ToApply', 'v1', { group: { name: 'wave-1', index: 1 } }),
      line('c1', 'ToApply', 'v1', { placement: 'canary', group: { name: '', index: 0 } }),
      line('f0', 'ToApply', 'v1', { group: { name: 'wave-1', index: 1 } }),
    ],
  }, 1);
  const b = bands(s);
  assert.deepEqual(b.map((x) => [x.placement, x.group, x.clusters]), [
    ['canary', '', ['c1']],
    ['fleet', 'wave-1', ['f0', 'f1']],
    ['fleet', 'wave-2', ['f2']],
  ]);
});

test('the summary and the table say what the grid shows', () => {
  const s = fromSnapshot({
    ...header,
    clusters: [
      line('a', 'Succeeded', 'v2'), line('b', 'Failed', 'v2', { note: 'apply error' }),
      line('c', 'ToApply', 'v1'), line('d', 'Progressing', 'v2'),
    ],
  }, 1);
  assert.equal(counts(s).failed, 1);
  assert.equal(summary(s),
    'app: Progressing, 4 clusters: 1 failed, 1 progressing, 1 on the update revision, 1 on the stable revision');
  assert.deepEqual(rows(s, parseFilters('')).map((r) => r.line.cluster), ['b', 'a', 'c', 'd'],
    'attention first');
  assert.deepEqual(rows(s, parseFilters('state=stable')).map((r) => r.line.cluster), ['c']);
  assert.deepEqual(rows(s, parseFilters('q=d')).map((r) => r.line.cluster), ['d']);
  assert.deepEqual(rows(s, parseFilters('attention=1')).map((r) => r.line.cluster), ['b']);
});

test('filters go to the URL and back', () => {
  const f = { state: 'failed', group: 'canary', q: 'eu-', attention: true };
  assert.deepEqual(parseFilters(formatFilters(f).slice(1)), f);
  assert.equal(formatFilters({ state: '', group: '', q: '', attention: false }), '');
});

test('a budget line is the text of the view with a countdown to its next deadline', () => {
  const t0 = Date.parse('2026-12-05T00:00:00Z');
  const budget = { text: 'Progressive · 2 in flight of maxConcurrency 2', nextDeadline: '2026-12-05T00:01:30Z' };
  assert.equal(budgetText(budget, t0), 'Progressive · 2 in flight of maxConcurrency 2 (the first passes in 1m30s)');
  assert.equal(budgetText(budget, t0 + 100000), 'Progressive · 2 in flight of maxConcurrency 2 (passed)');
  assert.equal(budgetText({ text: 'All · 0 in flight', nextDeadline: null }, t0), 'All · 0 in flight');
  assert.equal(budgetText(undefined, t0), '', 'none while an abort goes back');
});

test('a band shows the progress the view counted for it', () => {
  const s = fromSnapshot({
    ...header,
    bands: [{ placement: 'fleet', group: { name: 'g', index: 0 }, done: 1, of: 3 }],
    clusters: [line('a', 'Succeeded', 'v2'), line('b', 'Progressing', 'v2'), line('c', 'Succeeded', 'v1')],
  }, 1);
  const [band] = bands(s);
  assert.deepEqual(bandProgress(band, s.header), { done: 1, of: 3 });
});

test('the planned waves read as rollout plan prints them', () => {
  assert.equal(seconds(0), '0s');
  assert.equal(seconds(90), '1m30s');
  assert.equal(seconds(3600), '1h');
  assert.equal(seconds(3723), '1h2m3s');
  const plan = {
    waves: [
      { wave: 1, atSeconds: 0, action: 'rollout', revision: 'v2', clusters: ['a', 'b'] },
      { wave: 2, atSeconds: 75, action: 'revert', revision: 'v1', clusters: ['c', 'd', 'e', 'f'] },
    ],
  };
  assert.deepEqual(planRows(plan, 3), [
    { wave: 1, at: '+0s', action: 'rollout', revision: 'v2', count: 2, clusters: 'a, b' },
    { wave: 2, at: '+1m15s', action: 'revert', revision: 'v1', count: 4, clusters: 'c, d, e (+1 more)' },
  ]);
});

test('the header names a revision by number, hash and change-cause once the history is read', () => {
  const history = [
    { revision: 1, hash: 'aaa', changeCause: 'first release' },
    { revision: 2, hash: 'bbb', changeCause: null },
  ];
  assert.equal(revisionText('aaa', history), 'revision 1 (aaa): first release');
  assert.equal(revisionText('bbb', history), 'revision 2 (bbb)');
  assert.equal(revisionText('ccc', history), 'ccc');
  assert.equal(revisionText('aaa', null), 'aaa');
  assert.equal(revisionText(null, history), '<none>');
});

test('filters keep a cluster by state, decision group, name and attention', () => {
  const f = (extra) => ({ ...parseFilters(''), ...extra });
  const a = line('eu-1', 'Failed', 'v2', { group: { name: 'canary', index: 0 } });
  const b = line('us-1', 'Succeeded', 'v2', { group: { name: '', index: 2 } });
  assert.equal(groupLabel(a), 'canary');
  assert.equal(groupLabel(b), '2');
  assert.equal(filtering(f({})), false);
  assert.equal(filtering(f({ q: 'eu' })), true);
  assert.ok(matches(a, f({ state: 'failed', group: 'canary', q: 'eu', attention: true })));
  assert.ok(!matches(b, f({ attention: true })));
  assert.ok(matches(b, f({ group: '2' })));
  assert.ok(!matches(b, f({ q: 'eu' })));
});

test('the overview keeps every MWRS by namespace and name, in order, through changes', () => {
  const row = (namespace, name, state) => ({ namespace, name, state, message: '', desired: 2, updated: 1 });
  let list = listFromSnapshot({ rows: [row('b', 'app', 'Progressing'), row('a', 'web', 'Complete')] }, 3);
  assert.deepEqual(listRows(list).map((r) => `${r.namespace}/${r.name}`), ['a/web', 'b/app']);
  list = applyListChange(list, { seq: 4, header: { count: 2 }, rows: [row('a', 'api', 'Aborted'), row('b', 'app', 'Complete')], removed: ['a/web'] });
  assert.equal(list.seq, 4);
  assert.deepEqual(listRows(list).map((r) => [r.name, r.state]), [['api', 'Aborted'], ['app', 'Complete']]);
  assert.equal(listSummary(list), '2 ManifestWorkReplicaSets: 1 Aborted, 1 Complete');
  assert.equal(listSummary(listFromSnapshot({ rows: [] }, 1)), '0 ManifestWorkReplicaSets');
});
