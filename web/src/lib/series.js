// Training series as the charts show them (pure: tested with node --test).

// hpod-train's TensorBoard tags (src/train/trainer/trainer.cc) and metrics-JSONL
// keys (src/agent/training_metrics.h), in the order people read them; other
// series follow by name.
const KNOWN = [
  ['train/loss', 'Loss'], ['loss', 'Loss'],
  ['train/lr', 'Learning rate'], ['lr', 'Learning rate'],
  ['train/gradient_norm', 'Gradient norm'], ['grad_norm', 'Gradient norm'],
  ['train/tokens_per_s', 'Tokens/s'], ['tokens_per_s', 'Tokens/s'],
  ['checkpoint/stall_s', 'Checkpoint stall (s)'], ['checkpoint_stall_s', 'Checkpoint stall (s)'],
];
const TITLES = new Map(KNOWN);
const ORDER = new Map(KNOWN.map(([tag], i) => [tag, i]));

export function chartTitle(tag) {
  return TITLES.get(tag) || tag;
}

/** Series sorted: the known curves first, then by tag. */
export function sortSeries(series) {
  const rank = (s) => (ORDER.has(s.Tag) ? ORDER.get(s.Tag) : KNOWN.length);
  return [...series].sort((a, b) => rank(a) - rank(b) || (a.Tag < b.Tag ? -1 : a.Tag > b.Tag ? 1 : 0));
}

/** 'train/loss' → 'train-loss' for test ids. */
export function slug(tag) {
  return tag.replace(/[^A-Za-z0-9]+/g, '-').replace(/^-|-$/g, '');
}

/** uPlot's columns from the API's points: [[steps], [values]]. */
export function columns(points) {
  const sorted = [...points].sort((a, b) => a.Step - b.Step);
  return [sorted.map((p) => p.Step), sorted.map((p) => (Number.isFinite(p.Value) ? p.Value : null))];
}

/** A value as an axis or caption shows it: three significant digits, k/M for
 * large values (tokens/s), exponents for tiny ones (learning rates). */
export function formatValue(v) {
  if (v === null || v === undefined || Number.isNaN(v)) return '—';
  if (v === 0) return '0';
  const a = Math.abs(v);
  if (!Number.isFinite(v)) return String(v);
  if (a >= 1e6) return `${Number((v / 1e6).toPrecision(3))}M`;
  if (a >= 1e4) return `${Number((v / 1e3).toPrecision(3))}k`;
  if (a < 1e-2) return v.toExponential(1);
  return String(Number(v.toPrecision(3)));
}

/** An axis tick: as many decimals as the step between ticks needs (a curve that
 * moves in the fourth decimal gets four), with the same k and exponent forms. */
export function formatTick(v, increment) {
  if (v === 0) return '0';
  const inc = Math.abs(increment) || Math.abs(v);
  const decimals = (x) => Math.min(10, Math.max(0, Math.ceil(-Math.log10(x) - 1e-9)));
  if (Math.abs(v) >= 1e4 && inc >= 1e3) return `${(v / 1e3).toFixed(decimals(inc / 1e3))}k`;
  if (Math.abs(v) < 1e-2 && inc < 1e-3) return v.toExponential(1);
  return v.toFixed(decimals(inc));
}
