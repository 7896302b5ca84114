// Memory against micro-batch and against sequence length, stacked by component, drawn as plain SVG with
// DOM calls (no library: a few hundred bytes of code instead of tens of kilobytes). The numbers are
// pycore's (answers.charts, see CONTRACT.md); this only scales them to pixels. Colours are SVG attributes,
// not style="", so the page's Content-Security-Policy (style-src 'self') allows them.

import { bytesText } from "./format.js";

const SVG = "http://www.w3.org/2000/svg";
const W = 340, H = 190, LEFT = 8, RIGHT = 8, TOP = 16, BOTTOM = 30;

function node(tag, attributes = {}, text) {
  const element = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, String(value));
  if (text !== undefined) element.textContent = text;
  return element;
}

/**
 * One stacked bar chart.
 * @param {object} chart {x: [..], series: [{key, label, bytes: [..]}], usable_bytes, largest_fitting}
 * @param {string[]} colors one per series
 * @param {string} unit what x counts ("sequences", "tokens")
 * @returns {SVGSVGElement}
 */
export function stackedChart(chart, colors, unit) {
  const n = chart.x.length;
  const totals = chart.x.map((_, i) => chart.series.reduce((sum, s) => sum + (s.bytes[i] || 0), 0));
  const top = Math.max(chart.usable_bytes || 0, ...totals) * 1.08 || 1;
  const plotW = W - LEFT - RIGHT, plotH = H - TOP - BOTTOM;
  const slot = plotW / Math.max(n, 1);
  const y = (bytes) => TOP + plotH - (plotH * bytes) / top;
  const svg = node("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img" });
  svg.append(node("title", {}, `Memory per GPU against ${unit}, stacked by component`));
  chart.x.forEach((x, i) => {
    let base = 0;
    const fits = chart.largest_fitting !== null && chart.largest_fitting !== undefined && x <= chart.largest_fitting;
    const group = node("g", { class: `column${x === chart.largest_fitting ? " largest" : ""}`, "data-x": x,
      "data-total": totals[i] });
    chart.series.forEach((series, k) => {
      const bytes = series.bytes[i] || 0;
      if (bytes <= 0) return;
      const rect = node("rect", { x: LEFT + i * slot + slot * 0.15, width: slot * 0.7, y: y(base + bytes),
        height: Math.max(y(base) - y(base + bytes), 0), fill: colors[k % colors.length],
        "fill-opacity": fits ? 1 : 0.45, "data-series": series.key });
      rect.append(node("title", {}, `${x.toLocaleString("en-US")} ${unit} — ${series.label}: ${bytesText(bytes)}`));
      group.append(rect);
      base += bytes;
    });
    group.append(node("text", { x: LEFT + (i + 0.5) * slot, y: H - BOTTOM + 12, "text-anchor": "middle",
      class: "tick" }, x >= 1024 && x % 1024 === 0 ? `${x / 1024}K` : x.toLocaleString("en-US")));
    svg.append(group);
  });
  if (chart.usable_bytes) {
    const line = y(chart.usable_bytes);
    svg.append(node("line", { x1: LEFT, x2: W - RIGHT, y1: line, y2: line, class: "usable", stroke: "#c0392b",
      "stroke-dasharray": "4 3", "stroke-width": 1.2 }));
    svg.append(node("text", { x: W - RIGHT, y: line - 3, "text-anchor": "end", class: "usable-label", fill: "#c0392b" },
      `usable ${bytesText(chart.usable_bytes)}`));
  }
  const largest = chart.x.indexOf(chart.largest_fitting);
  if (largest >= 0) {
    const cx = LEFT + (largest + 0.5) * slot;
    svg.append(node("path", { d: `M${cx - 5},${H - BOTTOM + 26} L${cx + 5},${H - BOTTOM + 26} L${cx},${H - BOTTOM + 17} Z`,
      class: "largest-mark", fill: "#1f8a5b" }));
  }
  return svg;
}
