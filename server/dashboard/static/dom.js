// DOM helpers shared by the pages.
/** el("td", {class: "num"}, "3") builds an element; children may be nodes or text. */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (value !== undefined && value !== null) node.setAttribute(key, value);
  }
  for (const child of children.flat()) {
    if (child !== undefined && child !== null) node.append(child);
  }
  return node;
}

/** A table from a header row and rows of cells (numbers right-aligned). */
export function table(head, rows, attrs = {}) {
  const cell = (v) => (typeof v === "number" ? el("td", { class: "num" }, String(v)) : el("td", {}, v));
  return el(
    "table",
    attrs,
    el("thead", {}, el("tr", {}, head.map((h) => el("th", {}, h)))),
    el("tbody", {}, rows.map((r) => (r instanceof Node ? r : el("tr", {}, r.map(cell))))),
  );
}

export function bytes(n) {
  if (n === null || n === undefined) return "";
  if (n < 1024) return `${n} B`;
  if (n < 1024 ** 2) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 ** 2).toFixed(2)} MiB`;
}

export function seconds(from, to) {
  if (!from || !to) return "";
  return `${((Date.parse(to) - Date.parse(from)) / 1000).toFixed(2)} s`;
}

export function say(text, isError = false) {
  const message = document.getElementById("message");
  message.textContent = text;
  message.className = isError ? "error" : "muted";
}

export function toolchainText(tc) {
  return tc ? `torch ${tc.torch ?? "?"} · executorch ${tc.executorch ?? "?"}` : "";
}

/** A two-column table of [name, value] pairs, without a header row. */
export function pairs(rows, attrs = {}) {
  return el("table", attrs, el("tbody", {}, rows.map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, v)))));
}
