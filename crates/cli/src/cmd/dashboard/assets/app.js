// The dashboard page: routes (#/ the list, #/NAMESPACE/NAME one MWRS), the live stream of
// the MWRS shown, and drawing. What the data means is view.js's; this file only fetches,
// listens and draws. Every text from the hub goes in as text, never as markup.
import * as V from './view.js';

const main = document.getElementById('main');
const conn = document.getElementById('conn');
const redraw = document.getElementById('redraw');

/** What this server offers: `{actions, namespace, hub}`. */
const settings = await fetch('/api/settings').then((r) => r.json()).catch(() => ({ actions: false }));

/** The MWRS page's live connection and what it holds. */
const page = {
  source: null, state: null, key: null, cells: new Map(), bandHeads: [], table: false,
  // The list page's overview (`{seq, rows}`), and the virtual tables drawn.
  list: null, listTable: null, clusterTable: null,
  // Counts what was shown: an async step of a view the user has left since does nothing.
  shown: 0,
  filters: V.parseFilters(''),
  plan: { key: null, at: 0, timer: null }, history: { key: null, entries: null }, actions: '', acted: null,
};
/**
 * Redraw times in ms, for the footer and the browser test: every redraw, and by kind
 * (`full`: a snapshot drawn whole; `change`: a batch applied; `table`: the table view;
 * `list`: a frame of the overview).
 */
const timing = { last: 0, max: 0, count: 0, full: {}, change: {}, table: {}, list: {} };
window.mwrsRedraw = timing;

function el(tag, props = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c);
  return e;
}

function setConn(kind, text) {
  conn.className = `conn ${kind}`;
  conn.textContent = text;
}

function route() {
  const [path, query] = (location.hash.slice(1) || '/').split('?');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  if (parts.length !== 2) return null;
  return { namespace: parts[0], name: parts[1], filters: V.parseFilters(query) };
}

function stop() {
  page.shown += 1;
  if (page.source) page.source.close();
  page.source = null;
  page.listTable = null;
  page.clusterTable = null;
  clearTimeout(page.plan.timer);
  clearTimeout(page.tableTimer);
  page.tableTimer = null;
  page.plan = { key: null, at: 0, timer: null };
  page.history = { key: null, entries: null };
  page.actions = '';
  page.acted = null;
}

/** The API path of the MWRS shown, with `rest` after it. */
function apiPath(rest = '') {
  const [namespace, name] = page.key.split('/');
  return `/api/mwrs/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}${rest}`;
}

/** GET or POST `path` as JSON; throws with the server's reason. */
async function call(path, body) {
  const init = body === undefined ? {}
    : { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) };
  const r = await fetch(path, init);
  const text = await r.text();
  let data;
  try { data = JSON.parse(text); } catch { data = { error: text }; }
  if (!r.ok) throw new Error(data.error || r.statusText);
  return data;
}

// ---- the list -------------------------------------------------------------------------

function showList() {
  stop();
  page.state = null;
  page.key = null;
  page.list = null;
  main.replaceChildren(el('h2', { text: 'ManifestWorkReplicaSets' }), el('p', { text: 'reading ...' }));
  listenList();
}

/** Opens the live overview, resuming from the frame held (a tab shown again). */
function listenList() {
  const url = page.list ? `/api/mwrs/events?last=${page.list.seq}` : '/api/mwrs/events';
  openStream(url, (d) => {
    timed('list', () => { page.list = V.listFromSnapshot(d.view, d.seq); drawList(); });
  }, (d) => {
    if (!page.list) return;
    timed('list', () => { page.list = V.applyListChange(page.list, d); drawList(); });
  });
}

function drawList() {
  const rows = V.listRows(page.list);
  if (!page.listTable) {
    const head = ['NAMESPACE', 'NAME', 'STATE', 'PROGRESS', 'UPDATED', 'MESSAGE'];
    page.listTable = virtualTable('list', head, drawListRow);
    main.replaceChildren(el('h2', { text: 'ManifestWorkReplicaSets' }), el('p', { id: 'list-count' }), page.listTable.el);
  }
  document.getElementById('list-count').textContent = V.listSummary(page.list);
  page.listTable.set(rows);
}

function drawListRow(m) {
  const link = el('a', { href: `#/${encodeURIComponent(m.namespace)}/${encodeURIComponent(m.name)}`, text: m.name });
  const pct = m.desired ? Math.round((100 * m.updated) / m.desired) : 0;
  const bar = el('span', { class: 'bar', title: `${m.updated} of ${m.desired}` }, el('span'));
  bar.firstChild.style.width = `${pct}%`;
  return el('tr', { 'data-key': V.rowKey(m) },
    el('td', { text: m.namespace }), el('td', {}, link),
    el('td', { class: 'state', text: m.state }), el('td', {}, bar),
    el('td', { text: `${m.updated}/${m.desired}` }), el('td', { text: m.message, title: m.message }));
}

// ---- tables that draw only the rows in view ---------------------------------------------

/** Every row of a virtual table is this tall (app.css sets it), so a scroll offset is a row. */
const ROW_PX = 24;
/** Rows drawn above and below the ones in view, so a short scroll shows no gap. */
const OVERSCAN = 20;

/**
 * A table in a scrolling box that holds a row element only for the rows in view: a list
 * of 5,000 costs what 60 cost. `set(items)` gives it the rows (kept scroll position);
 * `drawRow(item)` makes one `<tr>`. The box's `data-rows` says how many rows it has.
 */
function virtualTable(id, head, drawRow) {
  const body = el('tbody');
  const table = el('table', {}, el('thead', {}, el('tr', {}, ...head.map((t) => el('th', { text: t })))), body);
  const box = el('div', { class: 'vscroll', id: `${id}-rows` }, table);
  let items = [];
  let queued = false;
  const paint = () => {
    queued = false;
    const height = box.clientHeight || window.innerHeight;
    const first = Math.max(0, Math.floor(box.scrollTop / ROW_PX) - OVERSCAN);
    const last = Math.min(items.length, first + Math.ceil(height / ROW_PX) + 2 * OVERSCAN);
    const spacer = (rows) => {
      const tr = el('tr', { class: 'spacer' });
      tr.style.height = `${rows * ROW_PX}px`;
      return tr;
    };
    body.replaceChildren(spacer(first), ...items.slice(first, last).map(drawRow), spacer(items.length - last));
    box.dataset.rows = String(items.length);
  };
  box.addEventListener('scroll', () => {
    if (!queued) { queued = true; requestAnimationFrame(paint); }
  });
  return { el: box, set(next) { items = next; paint(); } };
}

// ---- one MWRS -------------------------------------------------------------------------

function showMwrs(r) {
  const key = `${r.namespace}/${r.name}`;
  if (page.key === key && page.state) {
    drawAll();
    return;
  }
  stop();
  page.key = key;
  page.state = null;
  main.replaceChildren(el('p', { text: `reading ${key} ...` }));
  listen();
}

/** Opens the live stream, resuming from the frame held (a tab shown again). */
function listen() {
  let url = apiPath('/events');
  if (page.state) url += `?last=${page.state.seq}`;
  openStream(url, (d) => {
    timed('full', () => { page.state = V.fromSnapshot(d.view, d.seq); drawAll(); });
  }, (d) => {
    if (!page.state) return;
    timed('change', () => {
      const before = page.state;
      page.state = V.applyChange(before, d);
      drawChanges(before, d);
    });
  });
}

/** A live stream of frames at `url`: the whole picture to `onSnapshot`, then each change to `onChange`. */
function openStream(url, onSnapshot, onChange) {
  const s = new EventSource(url);
  page.source = s;
  s.addEventListener('open', () => setConn('live', 'live'));
  s.addEventListener('error', () => setConn('', 'reconnecting ...'));
  s.addEventListener('stale', (e) => setConn('stale', `stale: ${JSON.parse(e.data).why}`));
  s.addEventListener('snapshot', (e) => { onSnapshot(JSON.parse(e.data)); setConn('live', 'live'); });
  s.addEventListener('change', (e) => { onChange(JSON.parse(e.data)); setConn('live', 'live'); });
}

function timed(kind, f) {
  const t0 = performance.now();
  f();
  const ms = performance.now() - t0;
  timing.last = ms;
  timing.max = Math.max(timing.max, ms);
  timing.count += 1;
  const k = timing[kind];
  k.count = (k.count || 0) + 1;
  k.total = (k.total || 0) + ms;
  k.max = Math.max(k.max || 0, ms);
  redraw.textContent = `last redraw ${ms.toFixed(1)} ms (${timing.count} redraws, slowest ${timing.max.toFixed(1)} ms)`;
}

function drawAll() {
  const s = page.state;
  if (!s) return;
  const r = route();
  const filters = r ? r.filters : V.parseFilters('');
  page.cells = new Map();
  page.bandHeads = [];
  page.filters = filters;
  const grid = el('section', { id: 'grid', 'aria-hidden': 'true' });
  for (const b of V.bands(s)) {
    const cells = el('div', { class: 'grid' });
    for (const name of b.clusters) {
      const cell = el('span', { class: 'cell', 'data-cluster': name, onclick: () => detail(name) });
      page.cells.set(name, cell);
      paint(cell, s.clusters.get(name));
      cells.append(cell);
    }
    const head = el('h3');
    page.bandHeads.push({ band: b, head });
    grid.append(el('div', { class: 'band' }, head, cells));
  }
  const legend = el('div', { class: 'legend' }, ...V.STATES.map((st) =>
    el('span', {}, el('span', { class: `cell s-${st}` }), V.LABELS[st])));
  main.replaceChildren(
    el('section', { id: 'head' }), el('section', { id: 'actions', class: 'actions' }), legend,
    controls(filters), el('p', { id: 'summary', class: 'summary' }), grid,
    el('section', { id: 'plan', class: 'plan' }),
    el('section', { id: 'table', class: page.table ? '' : 'hidden' }),
    el('section', { id: 'detail', class: 'detail hidden' }));
  page.actions = '';
  drawHead();
  drawTable(filters);
  if (page.plan.shown) drawPlan(page.plan.shown);
}

/** Each band's heading: its name and how far it has got. */
function drawBandHeads() {
  for (const { band: b, head } of page.bandHeads) {
    const { done, of } = V.bandProgress(b, page.state.header);
    const title = b.group ? `${b.placement} / ${b.group}` : `${b.placement} / group ${b.index}`;
    const bar = el('span', { class: 'bar' }, el('span'));
    bar.firstChild.style.width = `${of ? Math.round((100 * done) / of) : 0}%`;
    head.replaceChildren(`${title} `, bar, ` ${done}/${of}`);
  }
}

/** Paints only the cells `change` touched. */
function drawChanges(before, change) {
  const s = page.state;
  const r = V.repaint(before, change);
  if (r.layout) {
    drawAll();
    return;
  }
  for (const name of r.clusters) {
    const cell = page.cells.get(name);
    if (cell) paint(cell, s.clusters.get(name));
  }
  drawHead();
  if (page.table) tableWanted();
}

/** Draws the table again within a second: it lists every cluster, so not on every batch. */
function tableWanted() {
  if (page.tableTimer) return;
  page.tableTimer = setTimeout(() => {
    page.tableTimer = null;
    const r = route();
    if (page.table && r) timed('table', () => drawTable(r.filters));
  }, 1000);
}

/** Colours `cell`: its state, outlined if it set off the abort, dimmed if the filters leave it out. */
function paint(cell, line) {
  const st = line.cell;
  const dim = V.filtering(page.filters) && !V.matches(line, page.filters);
  cell.className = `cell s-${st}${line.cause ? ' cause' : ''}${dim ? ' dim' : ''}`;
  cell.title = `${line.cluster}: ${V.LABELS[st]} (${line.state} on ${line.revision || 'no revision'}${line.since ? `, since ${line.since}` : ''})`;
}

function drawHead() {
  const s = page.state;
  const h = s.header;
  const head = document.getElementById('head');
  const rev = h.reverting;
  const parts = [
    el('h2', {}, `mwrs/${h.name} `, el('span', { class: 'state', text: h.state })),
    el('p', { text: h.message }),
    el('p', { id: 'revisions', text: `current ${V.revisionText(h.currentRevision, page.history.entries)}; update ${V.revisionText(h.updateRevision, page.history.entries)}` }),
  ];
  if (h.lastAbort) {
    const a = h.lastAbort;
    const causes = [...(a.failedClusters || []), ...(a.timedOutClusters || [])].join(', ');
    const text = `aborted at ${a.time} (${a.trigger}) on revision ${a.revision}${causes ? `, set off by ${causes}` : ''}`
      + (rev ? `; reverting: ${rev.back} of ${rev.of} back on the stable revision` : '');
    parts.push(el('p', { class: 'abort', id: 'abort', text }));
  }
  if (h.note) parts.push(el('p', { text: h.note }));
  const budgets = el('div', { class: 'budgets', id: 'budgets' });
  for (const p of h.placements || []) {
    const bar = el('span', { class: 'bar' }, el('span'));
    bar.firstChild.style.width = `${p.desired ? Math.round((100 * p.done) / p.desired) : 0}%`;
    const extra = [p.progressing && `${p.progressing} progressing`, p.validating && `${p.validating} validating`,
      p.failed && `${p.failed} failed`, p.timeOut && `${p.timeOut} timed out`].filter(Boolean).join(', ');
    budgets.append(el('div', {},
      el('span', {}, `${p.name} `, bar, ` ${p.done}/${p.desired}${extra ? ` (${extra})` : ''}`),
      el('div', { class: 'budget', 'data-placement': p.name, text: V.budgetText(p.budget, Date.now()) })));
  }
  parts.push(budgets);
  head.replaceChildren(...parts);
  const summary = V.summary(s);
  document.getElementById('summary').textContent = summary;
  drawBandHeads();
  drawActions();
  planWanted(summary);
  historyWanted();
}

/** Reads the history again when the header names a revision it does not hold. */
function historyWanted() {
  const h = page.state.header;
  const key = `${h.currentRevision}|${h.updateRevision}`;
  if (key === page.history.key) return;
  page.history.key = key;
  const mwrs = page.key;
  call(apiPath('/history')).then((got) => {
    if (page.key !== mwrs) return;
    page.history.entries = got.revisions;
    if (page.state) drawHead();
  }).catch(() => {});
}

// ---- the planned waves ----------------------------------------------------------------

/**
 * Asks for the plan again when the rollout moved, at most every 5 s. `summary` counts the
 * cells by state (and names the phase): any move of a cluster changes it.
 */
function planWanted(summary) {
  const h = page.state.header;
  const key = `${h.currentRevision}|${h.updateRevision}|${summary}`;
  if (key === page.plan.key) return;
  page.plan.key = key;
  if (page.plan.timer) return;
  const wait = Math.max(0, page.plan.at + 5000 - Date.now());
  page.plan.timer = setTimeout(loadPlan, wait);
}

async function loadPlan() {
  page.plan.timer = null;
  page.plan.at = Date.now();
  const key = page.key;
  let plan;
  try {
    plan = await call(apiPath('/plan'));
  } catch (e) {
    plan = { error: e.message };
  }
  if (page.key !== key) return;
  page.plan.shown = plan;
  drawPlan(plan);
}

function drawPlan(plan) {
  const section = document.getElementById('plan');
  if (!section) return;
  const title = el('h3', { text: 'Planned waves from now (as `mwrs rollout plan` shows them)' });
  if (plan.error) {
    section.replaceChildren(title, el('p', { text: `the plan cannot be computed: ${plan.error}` }));
    return;
  }
  const rows = V.planRows(plan);
  const parts = [title];
  if (rows.length) {
    const body = el('tbody');
    for (const w of rows) {
      body.append(el('tr', { class: `wave-${w.action}` }, ...[w.wave, w.at, w.action, w.revision, w.count, w.clusters]
        .map((x) => el('td', { text: String(x) }))));
    }
    const head = el('tr', {}, ...['WAVE', 'AT', 'ACTION', 'REVISION', 'COUNT', 'CLUSTERS'].map((x) => el('th', { text: x })));
    parts.push(el('table', {}, el('thead', {}, head), body));
  } else {
    parts.push(el('p', { text: 'no cluster gets a new revision' }));
  }
  parts.push(el('p', { id: 'plan-end', text: plan.summary }));
  if (plan.note) parts.push(el('p', { text: plan.note }));
  section.replaceChildren(...parts);
}

// ---- actions (--enable-actions) -------------------------------------------------------

/** The buttons for what can be done now, and what the last action said. */
function drawActions() {
  const section = document.getElementById('actions');
  if (!section || !settings.actions) return;
  const offered = page.state.header.actions || [];
  const key = `${offered.join(',')}|${page.acted ? page.acted.said : ''}`;
  if (key === page.actions) return;
  page.actions = key;
  const buttons = offered.map((a) => el('button', {
    type: 'button', 'data-action': a, text: `${a[0].toUpperCase()}${a.slice(1)}${a === 'undo' ? ' ...' : ''}`,
    onclick: () => confirmAction(a),
  }));
  const acted = page.acted
    ? [el('p', { id: 'acted', class: page.acted.failed ? 'acted failed' : 'acted', text: page.acted.said }),
      ...page.acted.notes.map((n) => el('p', { class: 'acted note', text: `note: ${n}` }))]
    : [];
  section.replaceChildren(...buttons, ...acted);
}

/** Asks before `action` is written: what it does and what it writes; an undo shows its dry run. */
function confirmAction(action) {
  // The view says what each action does and writes: the page states no rule of its own.
  const text = (page.state.header.confirmations || []).find((c) => c.action === action);
  if (!text) return;
  const error = el('p', { class: 'acted failed' });
  const go = el('button', { type: 'button', id: 'confirm-go', text: text.title.split(' ')[0] });
  const cancel = el('button', { type: 'button', text: 'Cancel' });
  const body = [el('h3', { text: text.title }), el('p', { text: text.does }), el('p', { class: 'budget', text: text.writes })];
  // Abort and retry name the update revision shown: the server refuses them for another.
  const shown = page.state.header.updateRevision;
  let target = () => (action === 'abort' || action === 'retry') && shown ? { revision: shown } : {};
  if (action === 'undo') {
    const choice = el('select', { id: 'undo-to', 'aria-label': 'revision' },
      el('option', { value: '', text: 'the last stable revision (as `rollout undo` picks it)' }));
    const dry = el('pre', { id: 'undo-diff', text: 'reading ...' });
    // What the dry run showed: the undo writes that revision, or nothing if the spec moved.
    let pin = null;
    let asked = 0;
    target = () => (pin ? { toRevision: String(pin.revision), generation: pin.generation } : {});
    const preview = async () => {
      const mine = ++asked;
      pin = null;
      go.disabled = true;
      dry.textContent = 'reading ...';
      const chosen = choice.value ? { toRevision: choice.value } : {};
      let said;
      try {
        const done = await call(apiPath('/actions/undo'), { ...chosen, dryRun: true });
        if (mine !== asked) return;
        [said, pin] = [done.said, done.undo || null];
      } catch (e) {
        said = e.message;
      }
      if (mine !== asked) return;
      dry.textContent = said;
      go.disabled = !pin;
    };
    choice.addEventListener('change', preview);
    body.push(choice, dry);
    call(apiPath('/history')).then((h) => {
      for (const r of h.revisions) {
        const words = [r.revision, r.hash, r.role, r.changeCause].filter(Boolean).join(' · ');
        choice.append(el('option', { value: String(r.revision), text: words }));
      }
    }).catch((e) => { error.textContent = `the history cannot be read: ${e.message}`; });
    preview();
  }
  const dialog = el('dialog', { id: 'confirm', class: 'confirm' }, ...body, error, el('div', { class: 'filters' }, go, cancel));
  document.body.append(dialog);
  const close = () => { dialog.close(); dialog.remove(); };
  cancel.addEventListener('click', close);
  dialog.addEventListener('cancel', close);
  go.addEventListener('click', async () => {
    go.disabled = true;
    try {
      const done = await call(apiPath(`/actions/${action}`), target());
      page.acted = { said: done.said, notes: done.notes, failed: false };
      close();
    } catch (e) {
      error.textContent = e.message;
      go.disabled = false;
      return;
    }
    page.actions = '';
    if (page.state) drawActions();
  });
  dialog.showModal();
}

function controls(f) {
  const go = (patch) => {
    const r = route();
    const next = { ...r.filters, ...patch };
    location.hash = `#/${encodeURIComponent(r.namespace)}/${encodeURIComponent(r.name)}${V.formatFilters(next)}`;
  };
  const state = el('select', { 'aria-label': 'state', onchange: (e) => go({ state: e.target.value }) },
    el('option', { value: '', text: 'every state' }), ...V.STATES.map((st) => el('option', { value: st, text: V.LABELS[st] })));
  state.value = f.state;
  const groups = el('select', { 'aria-label': 'decision group', onchange: (e) => go({ group: e.target.value }) },
    el('option', { value: '', text: 'every decision group' }));
  for (const b of V.bands(page.state)) {
    const value = b.group || String(b.index);
    if (![...groups.options].some((o) => o.value === value)) {
      groups.append(el('option', { value, text: b.group || `group ${b.index}` }));
    }
  }
  groups.value = f.group;
  const q = el('input', { type: 'search', placeholder: 'cluster name', 'aria-label': 'cluster name', value: f.q,
    onchange: (e) => go({ q: e.target.value }) });
  const attention = el('input', { type: 'checkbox', id: 'attention', onchange: (e) => go({ attention: e.target.checked }) });
  attention.checked = f.attention;
  const table = el('button', { type: 'button', text: page.table ? 'hide the table' : 'show as a table',
    onclick: (e) => timed('table', () => toggleTable(e.target)) });
  return el('div', { class: 'filters' }, state, groups, q, el('label', { for: 'attention' }, attention, ' needs attention'), table);
}

/** Shows or hides the table; only it is drawn (the grid and the rest stay as they are). */
function toggleTable(button) {
  page.table = !page.table;
  button.textContent = page.table ? 'hide the table' : 'show as a table';
  const t = document.getElementById('table');
  if (t) t.classList.toggle('hidden', !page.table);
  const r = route();
  if (page.table && r) drawTable(r.filters);
}

function drawTable(f) {
  const t = document.getElementById('table');
  if (!t || !page.table) return;
  if (!page.clusterTable || !t.contains(page.clusterTable.el)) {
    const head = ['CLUSTER', 'PLACEMENT', 'GROUP', 'REVISION', 'STATE', 'CELL', 'NOTE'];
    page.clusterTable = virtualTable('table', head, drawClusterRow);
    t.replaceChildren(page.clusterTable.el);
  }
  page.clusterTable.set(V.rows(page.state, f));
}

function drawClusterRow({ line, cell }) {
  return el('tr', { 'data-cluster': line.cluster },
    el('td', { text: line.cluster }), el('td', { text: line.placement }),
    el('td', { text: line.group ? line.group.name || String(line.group.index) : '' }),
    el('td', { text: line.revision || '<none>' }), el('td', { text: line.state }),
    el('td', { text: V.LABELS[cell] }), el('td', { text: line.note || '', title: line.note || '' }));
}

async function detail(name) {
  const line = page.state && page.state.clusters.get(name);
  const d = document.getElementById('detail');
  if (!line || !d) return;
  d.classList.remove('hidden');
  d.replaceChildren(
    el('h3', { text: name }),
    el('p', { text: `${line.state} on ${line.revision || 'no revision'} since ${line.since || '-'}` }),
    el('p', { text: line.note ? `note: ${line.note}` : 'no note' }),
    el('p', { text: 'reading its ManifestWork ...' }));
  let work;
  try {
    work = await call(apiPath(`/clusters/${encodeURIComponent(name)}`));
  } catch (e) {
    d.lastChild.textContent = `its ManifestWork cannot be read: ${e.message}`;
    return;
  }
  const body = el('tbody');
  for (const c of work.conditions) {
    body.append(el('tr', {}, el('td', { text: c.type }), el('td', { text: c.status }),
      el('td', { text: c.reason }), el('td', { text: c.lastTransitionTime }), el('td', { text: c.message })));
  }
  const head = el('tr', {}, ...['CONDITION', 'STATUS', 'REASON', 'SINCE', 'MESSAGE'].map((x) => el('th', { text: x })));
  d.lastChild.replaceWith(el('p', { text: `ManifestWork ${work.name} (revision ${work.revision || '-'})` }),
    el('table', { id: 'conditions' }, el('thead', {}, head), body));
}

/** Moves the deadline countdowns once a second (nothing else changes with time alone). */
function tick() {
  if (!page.state || document.hidden) return;
  for (const p of page.state.header.placements || []) {
    const line = document.querySelector(`.budget[data-placement="${CSS.escape(p.name)}"]`);
    if (line) line.textContent = V.budgetText(p.budget, Date.now());
  }
}

// ---- wiring ---------------------------------------------------------------------------

setInterval(tick, 1000);

function navigate() {
  const r = route();
  if (r) showMwrs(r);
  else showList();
}

window.addEventListener('hashchange', navigate);
document.addEventListener('visibilitychange', () => {
  if (document.hidden) {
    if (page.source) page.source.close();
    page.source = null;
    setConn('', 'paused while hidden');
  } else if (!page.source) {
    if (page.key) listen();
    else listenList();
  }
});
navigate();
