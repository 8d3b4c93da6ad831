// Charts drawn as inline SVG by hand: stacked bars, bars side by side, and
// lines with points. Each takes labels (one per bucket), series (a name and
// one value per bucket) and the width it is drawn at, in CSS pixels, so its
// text keeps its size; it returns the SVG's text. Every bar and point
// carries data-series, data-bucket and data-value, and every chart its
// name and how many points it drew, so what is drawn can be checked.

const H = 190;
const PAD = { left: 58, right: 24, top: 12, bottom: 28 };
const PALETTE = ["#58a6ff", "#3fb950", "#d29922", "#bc8cff", "#f778ba", "#39c5cf", "#ff7b72", "#a5d6ff", "#e3b341"];
const OTHER = "(other)";
const colors = new Map();

export const esc = (text) =>
  String(text).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);

// One colour per name for the page's life, so a provider looks the same in every chart.
export function colorFor(name) {
  if (name === OTHER || name === "-") return name === OTHER ? "#6e7681" : "#8a93a6";
  if (!colors.has(name)) colors.set(name, PALETTE[colors.size % PALETTE.length]);
  return colors.get(name);
}

// The top of the value axis: the maximum rounded up to 1, 2 or 5 times a power of ten.
function niceMax(max) {
  if (!(max > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(max));
  return [1, 2, 5, 10].map((m) => m * power).find((top) => top >= max * 0.999);
}

// The axes, grid and labels of a chart whose values run from 0 to `max`.
function frame(labels, max, format, W) {
  const plotW = W - PAD.left - PAD.right;
  const plotH = H - PAD.top - PAD.bottom;
  const step = plotW / Math.max(1, labels.length);
  const x = (i) => PAD.left + i * step;
  const y = (value) => PAD.top + plotH - (value / max) * plotH;
  let out = "";
  for (const value of [0, max / 2, max]) {
    out += `<line class="grid" x1="${PAD.left}" x2="${W - PAD.right}" y1="${y(value)}" y2="${y(value)}"/>`;
    out += `<text class="tick" x="${PAD.left - 6}" y="${y(value) + 4}" text-anchor="end">${esc(format(value))}</text>`;
  }
  // As many labels as fit without touching, counted back from the newest.
  const longest = Math.max(1, ...labels.map((label) => String(label).length));
  const fit = Math.max(2, Math.floor(plotW / (longest * 6.5 + 16)));
  const every = Math.max(1, Math.ceil(labels.length / fit));
  labels.forEach((label, i) => {
    if ((labels.length - 1 - i) % every === 0) {
      out += `<text class="tick" x="${x(i) + step / 2}" y="${H - 9}" text-anchor="middle">${esc(label)}</text>`;
    }
  });
  return { out, x, y, step };
}

function svg(name, W, body, points, empty) {
  const note = empty
    ? `<text class="empty" x="${W / 2}" y="${H / 2}" text-anchor="middle">nothing recorded in this span</text>`
    : "";
  return `<svg class="chart-svg" data-chart="${esc(name)}" data-points="${points}" viewBox="0 0 ${W} ${H}" role="img" aria-label="${esc(name)}">${body}${note}</svg>`;
}

function bar(series, i, label, value, box, format) {
  const { x, y, width, height } = box;
  return `<rect class="bar" x="${x}" y="${y}" width="${width}" height="${Math.max(0.5, height)}" fill="${series.color || colorFor(series.name)}"` +
    ` data-series="${esc(series.name)}" data-bucket="${i}" data-value="${value}">` +
    `<title>${esc(series.label || series.name)}, ${esc(label)}: ${esc(format(value))}</title></rect>`;
}

// Bars stacked per bucket, one colour per series.
export function stackedBars(name, { labels, series, format, width }) {
  const totals = labels.map((_, i) => series.reduce((sum, s) => sum + (s.values[i] || 0), 0));
  const f = frame(labels, niceMax(Math.max(0, ...totals)), format, width);
  const gap = Math.min(3, f.step * 0.15);
  let body = f.out;
  let points = 0;
  labels.forEach((label, i) => {
    let base = 0;
    for (const s of series) {
      const value = s.values[i] || 0;
      if (value <= 0) continue;
      const box = { x: f.x(i) + gap, y: f.y(base + value), width: f.step - 2 * gap, height: f.y(base) - f.y(base + value) };
      body += bar(s, i, label, value, box, format);
      base += value;
      points += 1;
    }
  });
  return svg(name, width, body, points, points === 0);
}

// Bars side by side per bucket, one slot per series: to compare two amounts.
export function groupedBars(name, { labels, series, format, width }) {
  const max = Math.max(0, ...series.flatMap((s) => s.values.map((v) => v || 0)));
  const f = frame(labels, niceMax(max), format, width);
  const gap = Math.min(3, f.step * 0.15);
  const slot = (f.step - 2 * gap) / Math.max(1, series.length);
  let body = f.out;
  let points = 0;
  labels.forEach((label, i) => {
    const any = series.some((s) => (s.values[i] || 0) > 0);
    series.forEach((s, k) => {
      const value = s.values[i];
      if (value == null || !any) return;
      const box = { x: f.x(i) + gap + k * slot, y: f.y(value), width: slot, height: f.y(0) - f.y(value) };
      body += bar(s, i, label, value, box, format);
      points += 1;
    });
  });
  return svg(name, width, body, points, points === 0);
}

// One line per series through the buckets that have a value; a gap where one has none.
export function lines(name, { labels, series, format, width }) {
  const max = Math.max(0, ...series.flatMap((s) => s.values.filter((v) => v != null)));
  const f = frame(labels, niceMax(max), format, width);
  let body = f.out;
  let points = 0;
  for (const s of series) {
    const color = s.color || colorFor(s.name);
    let path = "";
    let dots = "";
    s.values.forEach((value, i) => {
      if (value == null) return;
      const [px, py] = [f.x(i) + f.step / 2, f.y(value)];
      path += `${path && s.values[i - 1] != null ? "L" : "M"}${px.toFixed(1)},${py.toFixed(1)}`;
      dots += `<circle class="point" cx="${px}" cy="${py}" r="3" fill="${color}" data-series="${esc(s.name)}" data-bucket="${i}" data-value="${value}">` +
        `<title>${esc(s.label || s.name)}, ${esc(labels[i])}: ${esc(format(value))}</title></circle>`;
      points += 1;
    });
    if (path) body += `<path d="${path}" fill="none" stroke="${color}" stroke-width="2"/>${dots}`;
  }
  return svg(name, width, body, points, points === 0);
}

// A row of colour keys, one per series.
export function legend(series) {
  return series.map((s) =>
    `<span data-series="${esc(s.name)}"><i style="background:${s.color || colorFor(s.name)}"></i>${esc(s.label || s.name)}</span>`).join("");
}
