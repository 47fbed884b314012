// Display formats. AWS JSON 1.1 timestamps are epoch seconds (numbers).

/** "2025-12-01 22:50:07Z" (UTC, so every viewer reads the same time). */
export function formatTime(t) {
  if (t === undefined || t === null || t === '') return '—';
  const d = typeof t === 'number' ? new Date(t * 1000) : new Date(t);
  if (Number.isNaN(d.getTime())) return String(t);
  return d.toISOString().replace('T', ' ').replace(/\.\d{3}Z$/, 'Z');
}

export function formatBytes(n) {
  if (typeof n !== 'number') return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i += 1;
  }
  return `${i === 0 ? n : n.toFixed(1)} ${units[i]}`;
}

export function formatSeconds(s) {
  if (typeof s !== 'number') return '—';
  return s < 10 ? `${s.toFixed(2)} s` : `${s.toFixed(1)} s`;
}
