// Memory against micro-batch and against sequence length, stacked by component, drawn by uPlot 1.6.32
// (npm, MIT; 51 KB minified, 22 KB gzipped; build.py serves it from ./uplot/ and the page loads it only when
// the first chart is drawn). The numbers are pycore's (answers.charts, see CONTRACT.md): this only hands
// them to the library. uPlot sets styles through the CSSOM, which the page's Content-Security-Policy allows.

import { bytesText, numberText } from "./format.js";
import { canvasFill, paint, styleOf } from "./palette.js";

const GIB = 2 ** 30;
const HEIGHT = 210;
let library = null;

/** uPlot, imported once (build.py wraps its minified build as an ES module), with its stylesheet: both
 * only when the first chart is drawn, so neither holds up the page's first paint. */
export function chartLibrary() {
  if (!library) {
    const sheet = document.createElement("link");
    sheet.rel = "stylesheet";
    sheet.href = "./uplot/uPlot.min.css";
    const styled = new Promise((resolve) => { sheet.onload = sheet.onerror = resolve; });
    document.head.append(sheet);
    library = Promise.all([import("./uplot/uPlot.mjs"), styled]).then(([module]) => module.default);
  }
  return library;
}

/** Round steps of GiB (1, 2 or 5 times a power of ten) up to top bytes: about five gridlines. */
function gibSplits(top) {
  const max = top / GIB;
  const rough = max / 5;
  const power = 10 ** Math.floor(Math.log10(rough));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= rough);
  const splits = [];
  for (let v = 0; v <= max + 1e-9; v += step) splits.push(v * GIB);
  return splits;
}

const tick = (x) => (x >= 1024 && x % 1024 === 0 ? `${x / 1024}K` : numberText(x));

const AXIS_FONT = "10px system-ui, sans-serif";
const Y_AXIS = 44 + 14;      // the y axis's size and its label's, left of the bars
let measuring = null;

/** The x axis's labels: each bar's, or on a narrow chart whose labels would run into each other (a phone, and
 * bars at odd sizes such as 1,156 or 18,496 tokens), every second (third, ...) bar's, the first bar's kept. */
function tickLabels(u, xs) {
  const labels = xs.map((x) => tick(x));
  measuring ??= document.createElement("canvas").getContext("2d");
  measuring.font = AXIS_FONT;
  const widest = Math.max(0, ...labels.map((text) => measuring.measureText(text).width));
  const pitch = Math.max(u.width - Y_AXIS - 8, 1) / Math.max(xs.length, 1);    // the CSS pixels from bar to bar
  const step = Math.max(1, Math.ceil((widest + 4) / pitch));      // at least 4 pixels between two labels
  return labels.map((text, i) => (i % step === 0 ? text : ""));
}

/** What one drawing needs from pycore's chart: stacked sums, the largest that fits, the axis top. */
function stateOf(chart) {
  // Stacked bars: each series is drawn up to its running sum, the top of the stack first, so each lower
  // part paints over the one above it and every bar shows every component at its own size.
  const sums = [];
  let running = chart.x.map(() => 0);
  for (const series of chart.series) {
    running = running.map((sum, i) => sum + (series.bytes[i] || 0));
    sums.push(running);
  }
  const limit = chart.largest_fitting ?? null;
  return {
    chart, sums, totals: running, order: chart.series.map((_, k) => k).reverse(), limit,
    largest: chart.x.indexOf(limit), firstOver: limit === null ? 0 : chart.x.findIndex((x) => x > limit),
    top: Math.max(chart.usable_bytes || 0, ...running) * 1.1 || 1,
  };
}

/** The usable line, the bars past the largest that fits faded, and that largest marked. */
function drawMarks(uPlot, holder, u) {
  const { chart, totals, largest, firstOver, limit } = holder.chartState;
  const { ctx, bbox } = u;
  const px = uPlot.pxRatio;
  ctx.save();
  if (firstOver >= 0) {
    const from = u.valToPos(firstOver - 0.5, "x", true);
    ctx.fillStyle = "rgba(255, 255, 255, 0.55)";
    ctx.fillRect(from, bbox.top, bbox.left + bbox.width - from, bbox.height);
  }
  ctx.font = `${10 * px}px system-ui, sans-serif`;
  if (chart.usable_bytes) {
    const y = Math.round(u.valToPos(chart.usable_bytes, "y", true)) + 0.5;
    ctx.strokeStyle = ctx.fillStyle = "#c0392b";
    ctx.lineWidth = 1.2 * px;
    ctx.setLineDash([4 * px, 3 * px]);
    ctx.beginPath();
    ctx.moveTo(bbox.left, y);
    ctx.lineTo(bbox.left + bbox.width, y);
    ctx.stroke();
    ctx.textAlign = "right";
    // On a light backing, so the words stay legible where they cross a bar
    const words = `usable ${bytesText(chart.usable_bytes)}`, right = bbox.left + bbox.width - 2;
    const width = ctx.measureText(words).width;
    ctx.fillStyle = "rgba(255, 255, 255, 0.85)";
    ctx.fillRect(right - width - 2 * px, y - 14 * px, width + 4 * px, 12 * px);
    ctx.fillStyle = "#c0392b";
    ctx.fillText(words, right, y - 4 * px);
    holder.dataset.usableY = String(y / px);
  }
  ctx.fillStyle = ctx.strokeStyle = "#1f8a5b";
  if (limit !== null && largest < 0 && firstOver > 0) {
    // The largest that fits lies between two bars (x doubles from bar to bar): a green line there.
    const below = chart.x[firstOver - 1], above = chart.x[firstOver];
    const x = Math.round(u.valToPos(firstOver - 1 + Math.log2(limit / below) / Math.log2(above / below), "x", true)) + 0.5;
    ctx.lineWidth = 1.5 * px;
    ctx.setLineDash([]);
    ctx.beginPath();
    ctx.moveTo(x, bbox.top + bbox.height);
    ctx.lineTo(x, bbox.top + 12 * px);
    ctx.stroke();
    ctx.textAlign = "center";
    ctx.fillText(tick(limit), x, bbox.top + 9 * px);
  }
  if (largest >= 0) {            // a green triangle over the largest that fits
    const x = u.valToPos(largest, "x", true), y = u.valToPos(totals[largest], "y", true) - 4 * px;
    ctx.beginPath();
    ctx.moveTo(x - 5 * px, y - 8 * px);
    ctx.lineTo(x + 5 * px, y - 8 * px);
    ctx.lineTo(x, y);
    ctx.fill();
  }
  ctx.restore();
}

/** The bar under the pointer, in words: its x, its total and each component's size, largest first. */
function hoverText(holder, unit, idx) {
  const { chart, totals } = holder.chartState;
  const parts = chart.series.map((s, k) => [s, k]).filter(([s]) => s.bytes[idx] > 0).reverse();
  return [`${tick(chart.x[idx])} ${unit}: ${bytesText(totals[idx])}`, ...parts.map(([s]) => [s, `${s.label}: ${bytesText(s.bytes[idx])}`])];
}

/** A tooltip over the chart that follows the pointer: every component's full label and size at that bar. */
function showHover(holder, unit, u) {
  let tip = holder.querySelector(".chart-tip");
  const idx = u.cursor.idx;
  if (idx === null || idx === undefined || u.cursor.left < 0) {
    if (tip) tip.hidden = true;
    return;
  }
  if (!tip) {
    tip = document.createElement("div");
    tip.className = "chart-tip";
    u.over.append(tip);
  }
  const [head, ...rows] = hoverText(holder, unit, idx);
  const title = document.createElement("strong");
  title.textContent = head;
  const lines = rows.map(([series, text]) => {
    const line = document.createElement("div");
    const swatch = document.createElement("span");
    swatch.className = "swatch";
    paint(swatch, series.style);
    line.append(swatch, text);
    return line;
  });
  tip.replaceChildren(title, ...lines);
  tip.hidden = false;
  const left = u.cursor.left, width = u.over.clientWidth;
  tip.style.left = left > width / 2 ? "auto" : `${left + 12}px`;
  tip.style.right = left > width / 2 ? `${width - left + 12}px` : "auto";
}

/** The chart's numbers as a table for screen readers (visually hidden): one row per component, one column per bar. */
function dataTable(table, chart, state, unit) {
  if (!table) return;
  const row = (cells, header) => {
    const tr = document.createElement("tr");
    cells.forEach((text, i) => {
      const cell = document.createElement(header || i === 0 ? "th" : "td");
      cell.textContent = text;
      tr.append(cell);
    });
    return tr;
  };
  const caption = document.createElement("caption");
  caption.textContent = `Memory per GPU by component, against the number of ${unit}`;
  const head = document.createElement("thead");
  head.append(row([`Component, by ${unit}`, ...chart.x.map((x) => tick(x))], true));
  const body = document.createElement("tbody");
  for (const series of chart.series) body.append(row([series.label, ...series.bytes.map((b) => bytesText(b || 0))]));
  body.append(row(["Total per GPU", ...state.totals.map((b) => bytesText(b))]));
  table.replaceChildren(caption, head, body);
}

/**
 * One stacked bar chart in holder. A chart of the same shape (series, styles, number of bars) is
 * redrawn with its new numbers; another replaces it.
 * @param {object} uPlot the library
 * @param {HTMLElement} holder
 * @param {object} chart {x: [..], series: [{key, label, bytes: [..], style}], usable_bytes, largest_fitting}
 * @param {string} unit what x counts ("sequences", "tokens")
 * @param {HTMLTableElement} table where the numbers go for screen readers
 * @returns {object} the uPlot instance (also holder.chart)
 */
export function stackedChart(uPlot, holder, chart, unit, table) {
  const state = stateOf(chart);
  const styles = chart.series.map((s, k) => s.style ?? k);     // pycore's style index of each pool (palette.js)
  const shape = JSON.stringify([unit, chart.x.length, chart.series.map((s) => [s.key, s.label]), styles]);
  holder.chartState = state;
  const data = [chart.x.map((_, i) => i), ...state.order.map((k) => state.sums[k])];
  if (holder.chart && holder.dataset.shape === shape) {
    holder.chart.setData(data);
  } else {
    holder.chart?.destroy();
    holder.replaceChildren();
    holder.dataset.shape = shape;
    const font = AXIS_FONT, labelFont = "11px system-ui, sans-serif";
    const bars = uPlot.paths.bars({ size: [0.7, 64] });
    const current = () => holder.chartState;
    holder.chart = new uPlot({
      width: Math.max(holder.clientWidth, 240),
      height: HEIGHT,
      scales: { x: { time: false, range: () => [-0.5, current().chart.x.length - 0.5] },
        y: { range: () => [0, current().top] } },
      axes: [
        { splits: () => current().chart.x.map((_, i) => i),
          values: (u, splits) => tickLabels(u, splits.map((i) => current().chart.x[i])),
          size: 28, label: unit, labelSize: 14, labelFont, font },
        { splits: () => gibSplits(current().top), values: (u, splits) => splits.map((b) => `${+(b / GIB).toFixed(2)}`),
          size: 44, label: "GiB per GPU", labelSize: 14, labelFont, font },
      ],
      cursor: { drag: { x: false, y: false }, points: { show: false } },
      legend: { show: false },        // one legend for both charts, under them (app.js)
      series: [
        { label: unit },
        ...state.order.map((k) => ({ label: chart.series[k].label, fill: (u) => canvasFill(u.ctx, styles[k]),
          stroke: styleOf(styles[k]).color, width: 0, paths: bars, points: { show: false } })),
      ],
      hooks: { draw: [(u) => drawMarks(uPlot, holder, u)], setCursor: [(u) => showHover(holder, unit, u)] },
    }, data, holder);
    holder.chart.root.setAttribute("role", "img");
    // What each series is drawn in, for the tests: pool key and style name, bottom of the stack first.
    holder.dataset.styles = JSON.stringify(chart.series.map((s, k) => [s.key, styleOf(styles[k]).name]));
  }
  dataTable(table, chart, state, unit);
  holder.chart.root.setAttribute("aria-label", `Memory per GPU against ${unit}, stacked by component: ` +
    chart.x.map((x, i) => `${tick(x)} ${unit}, ${bytesText(state.totals[i])}`).join("; ") +
    ". The table that follows gives each component's size at each bar.");
  holder.dataset.largest = state.largest >= 0 ? String(chart.x[state.largest]) : "";
  return holder.chart;
}

/** Charts follow their box's width (a phone turned, a window resized). */
export const resizer = new ResizeObserver((entries) => {
  for (const { target } of entries) {
    const width = Math.max(target.clientWidth, 240);
    if (target.chart && target.chart.width !== width) target.chart.setSize({ width, height: HEIGHT });
  }
});
