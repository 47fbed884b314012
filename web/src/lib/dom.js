// The one way the console puts anything on the page: elements built with
// createElement and text set as text nodes. Nothing here (or anywhere in the
// console) assigns innerHTML, so a cluster name, an event, a log line or a
// recovery reason is always shown as the characters it is.

/**
 * h('button', {type: 'button', testid: 'x', onclick: fn}, 'Label', child, [more])
 *
 * Props: `testid` → data-testid; `class`; `on<event>` functions become listeners;
 * booleans set or leave out the attribute (disabled, checked, required…);
 * `value` and `checked` are set as properties; other props become attributes.
 * Children: strings and numbers become text nodes; null/undefined/false are
 * skipped; arrays are flattened.
 *
 * @returns {HTMLElement}
 */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'testid') el.dataset.testid = value;
    else if (key === 'class') el.className = value;
    else if (key.startsWith('on') && typeof value === 'function') {
      el.addEventListener(key.slice(2), value);
    } else if (key === 'value' || key === 'checked') el[key] = value;
    else if (value === true) el.setAttribute(key, '');
    else el.setAttribute(key, String(value));
  }
  append(el, children);
  return el;
}

/** Appends children as h() does. */
export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** Replaces every child of `el`. */
export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

let nextId = 0;
/** A page-unique id for label/for pairs. */
export function uid(prefix = 'f') {
  nextId += 1;
  return `${prefix}-${nextId}`;
}

/** A labelled form field: <div class=field><label for>…</label><input id>…</div>. */
export function field(label, input, hint) {
  if (!input.id) input.id = uid();
  return h('div', { class: 'field' }, h('label', { for: input.id }, label), input,
    hint ? h('span', { class: 'hint' }, hint) : null);
}

/** A table with a header row; `rows` are arrays of cells (strings or nodes). */
export function table(headers, rows, props = {}) {
  const t = h('table', props,
    h('thead', {}, h('tr', {}, headers.map((x) => h('th', { scope: 'col' }, x)))),
    h('tbody', {}, rows.map((r) => (r instanceof Node ? r : h('tr', {}, r.map((c) => h('td', {}, c)))))));
  for (const row of t.tBodies[0].rows) labelCells(t, row);
  return h('div', { class: 'table-wrap' }, t);
}

/**
 * Gives each cell of `row` its column's heading as data-label: on a narrow
 * window a table is shown as one card per row, each value beside its heading
 * (styles.css), instead of columns cut off at the window's edge.
 */
export function labelCells(tableEl, row) {
  const head = tableEl?.tHead?.rows[0];
  if (!head || !row.cells) return;
  [...row.cells].forEach((td, i) => {
    const label = head.cells[i]?.textContent || '';
    if (label) td.dataset.label = label;
  });
}

/** A status word with a colour by kind (the CSS knows the kinds). */
export function badge(text, testid) {
  const kind = String(text || '').toLowerCase().replace(/[^a-z]/g, '');
  return h('span', { class: `badge badge-${kind}`, testid }, text || '—');
}

/** An error box for a failed call (role=alert so screen readers hear it). */
export function errorBox(err, testid) {
  return h('div', { class: 'error', role: 'alert', testid }, String(err));
}

/**
 * Keeps one <tr> per key in `tbody` across refreshes, so what the user typed or
 * ticked in a row (a scale count, a checkbox) survives a poll, and so does the
 * keyboard focus on a row's button. `create(item)` returns {row, update(item)};
 * rows of keys no longer present are removed; rows follow the items' order.
 * A row already in its place is not touched: moving a node out of the document
 * and back (even appending the last child again) takes the focus from it.
 */
export function keyedRows(tbody, items, keyOf, create, cache = new Map()) {
  const keys = items.map(keyOf);
  const seen = new Set(keys);
  for (const [key, entry] of cache) {
    if (!seen.has(key)) {
      entry.row.remove();
      cache.delete(key);
    }
  }
  let next = tbody.firstChild;
  items.forEach((item, i) => {
    let entry = cache.get(keys[i]);
    if (!entry) {
      entry = create(item);
      cache.set(keys[i], entry);
      labelCells(tbody.parentElement, entry.row);
    }
    entry.update(item);
    if (entry.row === next) next = next.nextSibling;
    else tbody.insertBefore(entry.row, next);
  });
  return cache;
}
