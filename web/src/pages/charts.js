// Training curves with uPlot: one small chart per series (step on x), updated in
// place as new points arrive, sized to its container.

import 'uplot/dist/uPlot.min.css';

import uPlot from 'uplot';

import { h, replace } from '../lib/dom.js';
import { chartTitle, columns, formatTick, formatValue, slug, sortSeries } from '../lib/series.js';

/** A set of charts kept by tag inside `container`. */
export class ChartSet {
  constructor(container) {
    this.container = container;
    this.charts = new Map();
    this.observer = new ResizeObserver(() => this.resize());
    this.observer.observe(container);
  }

  width() {
    // Two charts side by side on a wide window, one on a narrow one (less the
    // gap between them and each figure's padding and border).
    const w = this.container.clientWidth || 600;
    return w >= 900 ? Math.floor((w - 16) / 2) - 20 : w - 20;
  }

  resize() {
    for (const c of this.charts.values()) c.plot.setSize({ width: this.width(), height: 220 });
  }

  update(series) {
    const seen = new Set();
    for (const s of sortSeries(series)) {
      seen.add(s.Tag);
      const data = columns(s.Points || []);
      let c = this.charts.get(s.Tag);
      if (!c) {
        const plotEl = h('div', { class: 'plot', 'aria-hidden': 'true' });
        const caption = h('p', { class: 'hint' });
        const box = h('figure', { class: 'chart', testid: `chart-${slug(s.Tag)}`, 'data-tag': s.Tag },
          h('figcaption', {}, chartTitle(s.Tag)), plotEl, caption);
        this.container.append(box);
        const plot = new uPlot({
          width: this.width(), height: 220,
          scales: { x: { time: false } },
          axes: [{ label: 'step' }, { size: 64,
            values: (u, splits, axis, space, increment) => splits.map((v) => formatTick(v, increment)) }],
          legend: { show: false },
          series: [{ label: 'step' }, { label: chartTitle(s.Tag), stroke: '#2563eb', width: 2,
            points: { show: data[0].length < 60 } }],
        }, data, plotEl);
        c = { box, plot, caption };
        this.charts.set(s.Tag, c);
      } else {
        c.plot.setData(data);
      }
      const n = data[0].length;
      c.box.dataset.points = String(n);
      replace(c.caption, n ? `${n} points; step ${data[0][n - 1]}: ${formatValue(data[1][n - 1])}` : 'No points yet.');
    }
    for (const [tag, c] of this.charts) {
      if (!seen.has(tag)) {
        c.plot.destroy();
        c.box.remove();
        this.charts.delete(tag);
      }
    }
  }

  destroy() {
    this.observer.disconnect();
    for (const c of this.charts.values()) c.plot.destroy();
    this.charts.clear();
    replace(this.container);
  }
}
