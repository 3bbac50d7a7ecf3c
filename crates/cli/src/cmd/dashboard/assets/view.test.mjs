// node --test crates/cli/src/cmd/dashboard/assets/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  actionText, actionsFor, applyChange, bandProgress, bands, causes, cellState, counts,
  filtering, formatFilters, fromSnapshot, groupLabel, matches, parseFilters, planRows, repaint, reverting, revisionText, rows, seconds,
  summary,
} from './view.js';

const header = {
  name: 'app', namespace: 'ns', state: 'Progressing', message: '',
  currentRevision: 'v1', updateRevision: 'v2',
  placements: [{ name: 'canary' }, { name: 'fleet' }],
};

const line = (cluster, state, revision, extra = {}) => ({
  cluster, placement: 'fleet', group: { name: 'g', index: 0 }, revision, state, since: null, ...extra,
});

test('a cell says where its cluster stands against the two revisions', () => {
  assert.equal(cellState(line('a', 'Succeeded', 'v2'), header), 'updated');
  assert.equal(cellState(line('a', 'Succeeded', 'v2', { soakUntil: '2026-12-05T00:00:00Z' }), header), 'soaking');
  assert.equal(cellState(line('a', 'ToApply', 'v1'), header), 'stable');
  assert.equal(cellState(line('a', 'ToApply', null), header), 'none');
  assert.equal(cellState(line('a', 'ToApply', 'v0'), header), 'waiting');
  assert.equal(cellState(line('a', 'Progressing', 'v2'), header), 'progressing');
  assert.equal(cellState(line('a', 'Validating', 'v2'), header), 'validating');
  assert.equal(cellState(line('a', 'Failed', 'v2'), header), 'failed');
  assert.equal(cellState(line('a', 'TimeOut', 'v2'), header), 'timedout');
  // Aborted: done on the stable revision is back, not updated.
  const aborted = { ...header, state: 'Aborted' };
  assert.equal(cellState(line('a', 'Succeeded', 'v1'), aborted), 'stable');
  assert.equal(cellState(line('a', 'Succeeded', 'v2'), aborted), 'waiting');
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

test('a change repaints the cells it touched, all of them when their meaning moved, or the layout', () => {
  const s0 = fromSnapshot({ ...header, clusters: [line('a', 'ToApply', 'v1'), line('b', 'ToApply', 'v1')] }, 1);
  const step = (h, clusters, removed = []) => ({ seq: 2, header: h, clusters, removed });
  const moved = step(header, [line('a', 'Progressing', 'v2')]);
  assert.deepEqual(repaint(s0, applyChange(s0, moved), moved), { layout: false, clusters: ['a'] });
  const aborted = { ...header, state: 'Aborted', lastAbort: { failedClusters: ['a'] } };
  const abort = step(aborted, []);
  assert.deepEqual(repaint(s0, applyChange(s0, abort), abort), { layout: false, clusters: ['a', 'b'] });
  for (const layout of [
    step(header, [], ['b']),
    step(header, [line('c', 'ToApply', 'v1')]),
    step(header, [line('a', 'ToApply', 'v1', { group: { name: 'h', index: 1 } })]),
  ]) {
    assert.deepEqual(repaint(s0, applyChange(s0, layout), layout), { layout: true });
  }
  assert.deepEqual([...causes(applyChange(s0, abort))], ['a']);
  assert.equal(causes(s0).size, 0);
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

test('an abort counts the clusters back on the stable revision and names its causes', () => {
  const aborted = {
    ...header, state: 'Aborted',
    lastAbort: { failedClusters: ['b'], timedOutClusters: ['c'] },
  };
  const s = fromSnapshot({
    ...aborted,
    clusters: [line('a', 'Succeeded', 'v1'), line('b', 'Progressing', 'v1'), line('c', 'ToApply', 'v2')],
  }, 1);
  assert.deepEqual(reverting(s), { back: 1, of: 3, causes: ['b', 'c'] });
  assert.equal(reverting(fromSnapshot({ ...header, clusters: [] }, 1)), null);
});

test('durations read as Go writes them', async () => {
  const { parseDuration } = await import('./view.js');
  assert.equal(parseDuration('90s'), 90000);
  assert.equal(parseDuration('1m30s'), 90000);
  assert.equal(parseDuration('1h'), 3600000);
  assert.equal(parseDuration('250ms'), 250);
  assert.equal(parseDuration('Never'), null);
  assert.equal(parseDuration('ten'), null);
  assert.equal(parseDuration('10x'), null);
});

test('budgets hold the counts against the strategy, with the next deadline', async () => {
  const { budgets, budgetText } = await import('./view.js');
  const placement = {
    name: 'fleet', failed: 1, timeOut: 0,
    strategy: { type: 'Progressive', progressive: { maxConcurrency: 2, maxFailures: '10%', progressDeadline: '1m', minSuccessTime: '30s' } },
  };
  const t0 = Date.parse('2026-12-05T00:00:00Z');
  const s = fromSnapshot({
    ...header,
    clusters: [
      line('a', 'Progressing', 'v2', { since: '2026-12-05T00:00:00Z' }),
      line('b', 'Progressing', 'v2', { since: '2026-12-05T00:00:20Z' }),
      line('c', 'Failed', 'v2'),
      line('d', 'Progressing', 'v2', { placement: 'canary', since: '2026-12-04T00:00:00Z' }),
    ],
  }, 1);
  const b = budgets(placement, s, t0 + 15000);
  assert.deepEqual({ ...b }, {
    type: 'Progressive', failures: 1, maxFailures: '10%', inFlight: 2, maxConcurrency: 2,
    progressDeadline: '1m', deadlineInMs: 45000, minSuccessTime: '30s',
  });
  assert.equal(budgetText(b),
    'Progressive · failures 1 of maxFailures 10% · 2 in flight of maxConcurrency 2 · progressDeadline 1m (the first passes in 45s) · minSuccessTime 30s');
  assert.equal(budgetText(budgets({ name: 'x', failed: 0, timeOut: 0 }, s, t0)),
    'All · failures 0 of maxFailures 0 · 0 in flight');
});

test('a band counts its clusters at the target: the update revision, or the stable one during an abort', () => {
  const clusters = [line('a', 'Succeeded', 'v2'), line('b', 'Progressing', 'v2'), line('c', 'Succeeded', 'v1')];
  const s = fromSnapshot({ ...header, clusters }, 1);
  const [band] = bands(s);
  assert.deepEqual(bandProgress(band, s), { done: 1, of: 3 });
  const aborted = fromSnapshot({ ...header, state: 'Aborted', clusters }, 2);
  assert.deepEqual(bandProgress(bands(aborted)[0], aborted), { done: 1, of: 3 });
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

test('the actions offered fit the state, and each says what it writes', () => {
  assert.deepEqual(actionsFor({ ...header, state: 'Progressing' }), ['pause', 'abort', 'undo']);
  assert.deepEqual(actionsFor({ ...header, state: 'Paused' }), ['resume', 'abort', 'undo']);
  assert.deepEqual(actionsFor({ ...header, state: 'Aborted' }), ['pause', 'retry', 'undo']);
  assert.deepEqual(actionsFor({ ...header, state: 'Degraded' }), ['pause', 'abort', 'retry', 'undo']);
  const done = { ...header, state: 'Complete', currentRevision: 'v2' };
  assert.deepEqual(actionsFor(done), ['pause', 'undo']);
  const abort = actionText('abort', header);
  assert.equal(abort.title, 'Abort revision v2 of mwrs/app?');
  assert.match(abort.does, /back to the stable revision v1/);
  assert.match(abort.writes, /annotation mwrs\.rollout\.open-cluster-management\.io\/abort on mwrs\/app/);
  assert.match(actionText('undo', header).writes, /spec\.manifestWorkTemplate/);
  assert.equal(actionText('delete', header), null);
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
  assert.ok(matches(a, header, f({ state: 'failed', group: 'canary', q: 'eu', attention: true })));
  assert.ok(!matches(b, header, f({ attention: true })));
  assert.ok(matches(b, header, f({ group: '2' })));
  assert.ok(!matches(b, header, f({ q: 'eu' })));
});
