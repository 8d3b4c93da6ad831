// Charts drawn as inline SVG by hand: stacked bars, bars side by side, and
// lines with points. Each takes labels (one per bucket, for the tooltips),
// the time its buckets cover, series (a name and one value per bucket), the
// unit of its values and the width it is drawn at, in CSS pixels, so its
// text keeps its size; it returns the SVG's text. The value axis names its
// unit and its bottom and top; the time axis has ticks at round clock times
// and names the span it covers. Every bar and point carries data-series,
// data-bucket and data-value, every tick its time, and every chart its name,
// its tick step and how many points it drew, so what is drawn can be checked.

const H = 214;
const PAD = { right: 24, top: 26, bottom: 46 };
const PALETTE = ["#58a6ff", "#3fb950", "#d29922", "#bc8cff", "#f778ba", "#39c5cf", "#ff7b72", "#a5d6ff", "#e3b341"];
const OTHER = "(other)";
const MINUTE = 60000;
const DAY = 1440 * MINUTE;
const WEEK = 7 * DAY;
// 1970-01-05, the first Monday after the epoch: a week's ticks fall on Mondays.
const MONDAY = 4 * DAY;
// Text at 11 px is at most this wide per character, in the page's font.
const CHAR_PX = 6.5;
const colors = new Map();

// The steps a time axis may take, in minutes: each divides the unit above
// it, so ticks land on round clock times (:00, :15, 06:00, midnight).
export const TICK_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 180, 360, 720, 1440, 2880, 10080];

// Text made safe to put in markup.
export const esc = (text) =>
  String(text).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);

// One colour per name for the page's life, so a provider looks the same in every chart.
export function colorFor(name) {
  if (name === OTHER || name === "-") return name === OTHER ? "#6e7681" : "#8a93a6";
  if (!colors.has(name)) colors.set(name, PALETTE[colors.size % PALETTE.length]);
  return colors.get(name);
}

// The ticks of a time axis from `start` to `end` (ms since the epoch): the
// smallest step of TICK_STEPS that gives at most `most` ticks, and the times
// that are whole multiples of it on a clock `offset` minutes ahead of UTC.
// Pure, so that the choice can be tested apart from any page.
export function timeTicks(start, end, most, offset = 0) {
  const shift = offset * MINUTE;
  for (const minutes of TICK_STEPS) {
    const step = minutes * MINUTE;
    const origin = step === WEEK ? MONDAY : 0;
    const first = Math.ceil((start + shift - origin) / step) * step + origin - shift;
    const count = Math.max(0, Math.floor((end - first) / step) + 1);
    if (count <= most || minutes === TICK_STEPS.at(-1)) {
      return { minutes, times: Array.from({ length: count }, (_, i) => first + i * step) };
    }
  }
}

// A time as the clock `offset` minutes ahead of UTC shows it: "12-07",
// "17:15" or "12-07 17:15", so every label of an axis reads alike.
export function clock(t, offset, { date, time }) {
  const iso = new Date(t + offset * MINUTE).toISOString();
  return [date && iso.slice(5, 10), time && iso.slice(11, 16)].filter(Boolean).join(" ");
}

// The top of the value axis: the maximum rounded up to 1, 2 or 5 times a power of ten.
function niceMax(max) {
  if (!(max > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(max));
  return [1, 2, 5, 10].map((m) => m * power).find((top) => top >= max * 0.999);
}

// The value axis: its unit above it, and grid lines with labels at 0, half
// and `max`, as wide a margin as its longest label needs.
function valueAxis(max, format, unit, W) {
  const values = [0, max / 2, max];
  const left = Math.ceil(Math.max(...values.map((v) => format(v).length)) * CHAR_PX) + 12;
  const plotH = H - PAD.top - PAD.bottom;
  const y = (value) => PAD.top + plotH - (value / max) * plotH;
  let out = `<text class="unit y-unit" x="0" y="11">${esc(unit)}</text>`;
  for (const value of values) {
    out += `<line class="grid" x1="${left}" x2="${W - PAD.right}" y1="${y(value)}" y2="${y(value)}"/>`;
    out += `<text class="tick y-tick" x="${left - 6}" y="${y(value) + 4}" text-anchor="end">${esc(format(value))}</text>`;
  }
  return { out, left, y };
}

// The time axis: ticks at round times, as many as have room, and beneath
// them the span's first and last time and its clock. Buckets of whole days
// (UTC) are named by their date, under their bar; shorter ones by the
// local time at which a tick falls.
function timeAxis({ start, bucket, buckets, utc }, left, W) {
  const end = start + buckets * bucket;
  const offset = utc ? 0 : -new Date(end).getTimezoneOffset();
  const days = bucket >= DAY;
  const plotW = W - left - PAD.right;
  const step = plotW / Math.max(1, buckets);
  const x = (t) => left + ((t - start) / bucket) * step;
  const base = H - PAD.bottom;
  // Room for a label of five characters ("17:15", "12-07") and space on either side.
  const most = Math.max(2, Math.floor(plotW / (5 * CHAR_PX + 18)));
  const ticks = timeTicks(start, days ? end - bucket : end, most, offset);
  const dated = ticks.minutes >= 1440;
  let out = "";
  for (const t of ticks.times) {
    const at = x(t) + (days ? step / 2 : 0);
    const label = clock(t, offset, { date: dated, time: !dated });
    out += `<line class="grid" x1="${at}" x2="${at}" y1="${base}" y2="${base + 4}"/>`;
    out += `<text class="tick x-tick" x="${at}" y="${base + 16}" text-anchor="middle" data-time="${t}">${label}</text>`;
  }
  const when = (t) => clock(t, offset, { date: days || end - start >= DAY, time: !days });
  const span = `${when(start)} – ${when(days ? end - bucket : end)} ${utc ? "UTC" : "local time"}`;
  out += `<text class="unit x-span" x="${left}" y="${H - 6}">${esc(span)}</text>`;
  return { out, x: (i) => x(start + i * bucket), step, minutes: ticks.minutes, span };
}

// Both axes of a chart whose values run from 0 to `max`, and where its buckets and values go.
function frame(spec, max) {
  const values = valueAxis(max, spec.format, spec.unit, spec.width);
  const time = timeAxis({ ...spec.time, buckets: spec.labels.length }, values.left, spec.width);
  return { out: values.out + time.out, x: time.x, y: values.y, step: time.step, minutes: time.minutes, span: time.span };
}

// The SVG around a drawn chart, named for the ear as for the eye.
function svg(name, spec, f, body, points) {
  const W = spec.width;
  const note = points === 0
    ? `<text class="empty" x="${W / 2}" y="${H / 2}" text-anchor="middle">nothing recorded in this span</text>`
    : "";
  return `<svg class="chart-svg" data-chart="${esc(name)}" data-points="${points}" data-tick-minutes="${f.minutes}"` +
    ` viewBox="0 0 ${W} ${H}" role="img" aria-label="${esc(`${name}: ${spec.unit}, ${f.span}`)}">${f.out}${body}${note}</svg>`;
}

// One bar, its series, bucket and value on it for checks, and in a tooltip for people.
function bar(series, i, label, value, box, format) {
  const { x, y, width, height } = box;
  return `<rect class="bar" x="${x}" y="${y}" width="${width}" height="${Math.max(0.5, height)}" fill="${series.color || colorFor(series.name)}"` +
    ` data-series="${esc(series.name)}" data-bucket="${i}" data-value="${value}">` +
    `<title>${esc(series.label || series.name)}, ${esc(label)}: ${esc(format(value))}</title></rect>`;
}

// Bars stacked per bucket, one colour per series.
export function stackedBars(name, spec) {
  const { labels, series, format } = spec;
  const totals = labels.map((_, i) => series.reduce((sum, s) => sum + (s.values[i] || 0), 0));
  const f = frame(spec, niceMax(Math.max(0, ...totals)));
  const gap = Math.min(3, f.step * 0.15);
  let body = "";
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
  return svg(name, spec, f, body, points);
}

// Bars side by side per bucket, one slot per series: to compare two amounts.
export function groupedBars(name, spec) {
  const { labels, series, format } = spec;
  const max = Math.max(0, ...series.flatMap((s) => s.values.map((v) => v || 0)));
  const f = frame(spec, niceMax(max));
  const gap = Math.min(3, f.step * 0.15);
  const slot = (f.step - 2 * gap) / Math.max(1, series.length);
  let body = "";
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
  return svg(name, spec, f, body, points);
}

// One line per series through the buckets that have a value; a gap where one has none.
export function lines(name, spec) {
  const { labels, series, format } = spec;
  const max = Math.max(0, ...series.flatMap((s) => s.values.filter((v) => v != null)));
  const f = frame(spec, niceMax(max));
  let body = "";
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
  return svg(name, spec, f, body, points);
}

// A row of colour keys, one per series, each cut short with its full name in a title if it must be.
export function legend(series) {
  return series.map((s) => {
    const label = esc(s.label || s.name);
    return `<span data-series="${esc(s.name)}" title="${label}"><i style="background:${s.color || colorFor(s.name)}"></i>${label}</span>`;
  }).join("");
}
