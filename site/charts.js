// Memory against micro-batch and against sequence length, stacked by component, drawn by uPlot 1.6.32
// (npm, MIT; 51 KB minified, 22 KB gzipped; build.py serves it from ./uplot/ and the page loads it only when
// the first chart is drawn). The numbers are pycore's (answers.charts, see CONTRACT.md): this only hands
// them to the library. uPlot sets styles through the CSSOM, which the page's Content-Security-Policy allows.

import { bytesText } from "./format.js";

const GIB = 2 ** 30;
const HEIGHT = 210;
let library = null;

/** uPlot, imported once (build.py wraps its minified build as an ES module). */
export function chartLibrary() {
  library ??= import("./uplot/uPlot.mjs").then((module) => module.default);
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

const tick = (x) => (x >= 1024 && x % 1024 === 0 ? `${x / 1024}K` : x.toLocaleString("en-US"));

/**
 * One stacked bar chart in holder (replacing what was there).
 * @param {object} uPlot the library
 * @param {HTMLElement} holder
 * @param {object} chart {x: [..], series: [{key, label, bytes: [..]}], usable_bytes, largest_fitting}
 * @param {string[]} colors one per series
 * @param {string} unit what x counts ("sequences", "tokens")
 * @returns {object} the uPlot instance (also holder.chart)
 */
export function stackedChart(uPlot, holder, chart, colors, unit) {
  holder.chart?.destroy();
  holder.replaceChildren();
  const n = chart.x.length;
  // Stacked bars: each series is drawn up to its running sum, the top of the stack first, so each lower
  // part paints over the one above it and every bar shows every component at its own size.
  const sums = [];
  let running = chart.x.map(() => 0);
  for (const series of chart.series) {
    running = running.map((sum, i) => sum + (series.bytes[i] || 0));
    sums.push(running);
  }
  const totals = running;
  const order = chart.series.map((_, k) => k).reverse();
  const limit = chart.largest_fitting ?? null;
  const largest = chart.x.indexOf(limit);
  const firstOver = limit === null ? 0 : chart.x.findIndex((x) => x > limit);
  const top = Math.max(chart.usable_bytes || 0, ...totals) * 1.1 || 1;
  const bars = uPlot.paths.bars({ size: [0.7, 64] });

  const marks = (u) => {
    const { ctx, bbox } = u;
    ctx.save();
    if (firstOver >= 0) {       // the bars past the largest that fits, faded
      const from = u.valToPos(firstOver - 0.5, "x", true);
      ctx.fillStyle = "rgba(255, 255, 255, 0.55)";
      ctx.fillRect(from, bbox.top, bbox.left + bbox.width - from, bbox.height);
    }
    if (chart.usable_bytes) {
      const y = Math.round(u.valToPos(chart.usable_bytes, "y", true)) + 0.5;
      ctx.strokeStyle = ctx.fillStyle = "#c0392b";
      ctx.lineWidth = uPlot.pxRatio * 1.2;
      ctx.setLineDash([4 * uPlot.pxRatio, 3 * uPlot.pxRatio]);
      ctx.beginPath();
      ctx.moveTo(bbox.left, y);
      ctx.lineTo(bbox.left + bbox.width, y);
      ctx.stroke();
      ctx.font = `${10 * uPlot.pxRatio}px system-ui, sans-serif`;
      ctx.textAlign = "right";
      ctx.fillText(`usable ${bytesText(chart.usable_bytes)}`, bbox.left + bbox.width - 2, y - 4 * uPlot.pxRatio);
      holder.dataset.usableY = String(y / uPlot.pxRatio);
    }
    if (limit !== null && largest < 0 && firstOver > 0) {
      // The largest that fits lies between two bars (x doubles from bar to bar): a green line there.
      const below = chart.x[firstOver - 1], above = chart.x[firstOver];
      const at = firstOver - 1 + Math.log2(limit / below) / Math.log2(above / below);
      const x = Math.round(u.valToPos(at, "x", true)) + 0.5;
      ctx.strokeStyle = ctx.fillStyle = "#1f8a5b";
      ctx.lineWidth = uPlot.pxRatio * 1.5;
      ctx.setLineDash([]);
      ctx.beginPath();
      ctx.moveTo(x, bbox.top + bbox.height);
      ctx.lineTo(x, bbox.top + 12 * uPlot.pxRatio);
      ctx.stroke();
      ctx.font = `${10 * uPlot.pxRatio}px system-ui, sans-serif`;
      ctx.textAlign = "center";
      ctx.fillText(tick(limit), x, bbox.top + 9 * uPlot.pxRatio);
      holder.dataset.limitX = String(x / uPlot.pxRatio);
    }
    if (largest >= 0) {          // a green triangle over the largest that fits
      const x = u.valToPos(largest, "x", true), y = u.valToPos(totals[largest], "y", true) - 4 * uPlot.pxRatio;
      const s = 5 * uPlot.pxRatio;
      ctx.fillStyle = "#1f8a5b";
      ctx.beginPath();
      ctx.moveTo(x - s, y - s * 1.6);
      ctx.lineTo(x + s, y - s * 1.6);
      ctx.lineTo(x, y);
      ctx.fill();
    }
    ctx.restore();
  };

  const options = {
    width: Math.max(holder.clientWidth, 240),
    height: HEIGHT,
    scales: { x: { time: false, range: [-0.5, n - 0.5] }, y: { range: [0, top] } },
    axes: [
      { splits: () => chart.x.map((_, i) => i), values: (u, splits) => splits.map((i) => tick(chart.x[i])), size: 28,
        label: unit, labelSize: 14, labelFont: "11px system-ui, sans-serif", font: "10px system-ui, sans-serif" },
      { splits: () => gibSplits(top), values: (u, splits) => splits.map((b) => `${+(b / GIB).toFixed(2)}`), size: 44,
        label: "GiB per GPU",
        labelSize: 14, labelFont: "11px system-ui, sans-serif", font: "10px system-ui, sans-serif" },
    ],
    cursor: { drag: { x: false, y: false }, points: { show: false } },
    legend: { show: false },        // one legend for both charts, under them (app.js)
    series: [
      { label: unit, value: (u, i) => (i === null ? "—" : tick(chart.x[i])) },
      ...order.map((k) => ({
        label: chart.series[k].label,
        fill: colors[k],
        stroke: colors[k],
        width: 0,
        paths: bars,
        points: { show: false },
        value: (u, v, s, i) => (i === null ? "—" : bytesText(chart.series[k].bytes[i] || 0)),
      })),
    ],
    hooks: { draw: [marks] },
  };
  const data = [chart.x.map((_, i) => i), ...order.map((k) => sums[k])];
  const plot = new uPlot(options, data, holder);
  plot.root.setAttribute("role", "img");
  plot.root.setAttribute("aria-label", `Memory per GPU against ${unit}, stacked by component: ` +
    chart.x.map((x, i) => `${tick(x)} ${unit}, ${bytesText(totals[i])}`).join("; "));
  holder.dataset.largest = largest >= 0 ? String(chart.x[largest]) : "";
  holder.chart = plot;
  return plot;
}

/** Charts follow their box's width (a phone turned, a window resized). */
export const resizer = new ResizeObserver((entries) => {
  for (const { target } of entries) {
    const width = Math.max(target.clientWidth, 240);
    if (target.chart && target.chart.width !== width) target.chart.setSize({ width, height: HEIGHT });
  }
});
