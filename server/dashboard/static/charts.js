// Tiny inline-SVG charts: horizontal stacked bars, drawn without a library.
const NS = "http://www.w3.org/2000/svg";
const ROW = 22;
const LABEL = 180;
const WIDTH = 640;

function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(NS, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

/**
 * rows: [{label, values: [number per series]}]; series: [{name, color}].
 * Returns an <svg> with one stacked bar per row and a legend.
 */
export function stackedBars(rows, series, format = (v) => String(v)) {
  const totals = rows.map((row) => row.values.reduce((a, b) => a + b, 0));
  const max = Math.max(1, ...totals);
  const plot = WIDTH - LABEL - 90;
  const height = (rows.length + 1) * ROW + 8;
  const chart = svg("svg", { viewBox: `0 0 ${WIDTH} ${height}`, class: "chart", role: "img" });
  rows.forEach((row, i) => {
    const y = i * ROW + 4;
    const short = row.label.length > 26 ? `${row.label.slice(0, 25)}…` : row.label;
    const label = svg("text", { x: LABEL - 6, y: y + 14, "text-anchor": "end" }, short);
    label.append(svg("title", {}, row.label));
    chart.append(label);
    let x = LABEL;
    row.values.forEach((value, s) => {
      const w = (value / max) * plot;
      const rect = svg("rect", { x, y, width: Math.max(w, 0), height: ROW - 6 });
      rect.setAttribute("fill", series[s].color);
      rect.append(svg("title", {}, `${series[s].name}: ${format(value)}`));
      chart.append(rect);
      x += w;
    });
    chart.append(svg("text", { x: x + 4, y: y + 14 }, format(totals[i])));
  });
  let x = LABEL;
  const y = rows.length * ROW + 6;
  for (const { name, color } of series) {
    chart.append(svg("rect", { x, y, width: 10, height: 10, fill: color }));
    chart.append(svg("text", { x: x + 14, y: y + 9 }, name));
    x += 24 + name.length * 7;
  }
  return chart;
}

export const PALETTE = ["#2f6db5", "#e07b39", "#4c9a5b", "#a04fb0", "#c9a227", "#7a7a7a"];
