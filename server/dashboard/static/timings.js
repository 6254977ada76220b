// The job page's stage timings: when each status and stage of the job began and how long
// it lasted, from the job's event stream (each event says when its change began).
import { PALETTE, stackedBars } from "./charts.js";
import { el, table } from "./dom.js";

const TERMINAL = new Set(["succeeded", "failed", "canceled"]);

const between = (from, to) => (Date.parse(to) - Date.parse(from)) / 1000;
const label = (event) => (event.stage ? `${event.status} · ${event.stage}` : event.status);

function row(event, next, first) {
  const took = next ? between(event.changed_at, next.changed_at) : null;
  const text = took !== null ? `${took.toFixed(2)} s` : TERMINAL.has(event.status) ? "" : "in progress";
  return el(
    "tr",
    { "data-status": event.status, "data-stage": event.stage ?? "" },
    el("td", { class: "num" }, String(event.attempt)),
    el("td", {}, event.status),
    el("td", {}, event.stage ?? ""),
    el("td", { class: "num" }, `+${between(first.changed_at, event.changed_at).toFixed(2)} s`),
    el("td", { class: "num", "data-field": "took", "data-seconds": took ?? "" }, text),
  );
}

function chart(timed) {
  const rows = timed.slice(0, -1).map((event, i) => ({
    label: `${i + 1}. ${label(event)}`,
    values: [between(event.changed_at, timed[i + 1].changed_at)],
  }));
  return rows.length ? stackedBars(rows, [{ name: "seconds", color: PALETTE[0] }], (v) => `${v.toFixed(2)} s`) : "";
}

/** The timings of the job's events so far (those that say when they began), with a chart. */
export function timingsCard(events) {
  const timed = events.filter((event) => event.changed_at);
  const rows = timed.map((event, i) => row(event, timed[i + 1], timed[0]));
  return el(
    "div",
    { class: "card", id: "job-timings-card" },
    el("h3", {}, "Stage timings"),
    table(["attempt", "status", "stage", "began", "took"], rows, { id: "job-timings" }),
    chart(timed),
  );
}
