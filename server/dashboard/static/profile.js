// The artifact page's profile card: a profile job per method (POST /v1/profile-jobs on the
// numerics check's inputs, followed over its event stream, then GET /v1/jobs/{id}/profile):
// latency, loads, peak memory and the top operators as sorted bars with the backend each ran
// on, the rest collapsed into one row; and the method's delegation summary from the report.
// A profile job's own page shows the same view (profileView).
import { api, streamEvents } from "./api.js";
import { PALETTE } from "./charts.js";
import { bytes, el, pairs, table } from "./dom.js";

const TOP = 10; // operators shown before "N other operators"
const DEFAULT_ITERATIONS = 20;

const ms = (us) => `${(us / 1000).toFixed(3)} ms`;
const percent = (share) => `${(100 * share).toFixed(1)}%`;

function bar(fraction, color) {
  const fill = el("span", { class: "bar-fill" });
  fill.style.width = `${Math.max(0, Math.min(1, fraction)) * 100}%`; // CSSOM: allowed by the CSP
  fill.style.background = color;
  return el("span", { class: "bar-track" }, fill);
}

function operatorRow(op, max, colors) {
  return el(
    "div",
    { class: "bar-row", "data-operator": op.name, "data-backend": op.backend, "data-total-us": op.total_us },
    el("span", { class: "bar-label", title: `${op.name}: ${op.calls} calls` }, op.name),
    el("span", { class: "bar-backend" }, op.backend),
    bar(op.total_us / max, colors.get(op.backend)),
    el("span", { class: "num" }, `${ms(op.total_us)} · ${percent(op.share)}`),
  );
}

/** The top operators as sorted bars; the rest in one "N other operators" row that expands. */
export function operatorBars(operators, top = TOP) {
  const sorted = [...operators].sort((a, b) => b.total_us - a.total_us);
  const backends = [...new Set(sorted.map((op) => op.backend))].sort();
  const colors = new Map(backends.map((b, i) => [b, PALETTE[i % PALETTE.length]]));
  const shown = sorted.length > top + 1 ? sorted.slice(0, top) : sorted;
  const rest = sorted.slice(shown.length);
  const restUs = rest.reduce((sum, op) => sum + op.total_us, 0);
  const max = Math.max(1e-9, shown[0]?.total_us ?? 0, restUs);
  const bars = el("div", { class: "bars", id: "profile-operators" }, shown.map((op) => operatorRow(op, max, colors)));
  if (rest.length) {
    const share = rest.reduce((sum, op) => sum + op.share, 0);
    const summary = el("summary", { class: "bar-row other", "data-total-us": restUs, "data-count": rest.length },
      el("span", { class: "bar-label" }, `${rest.length} other operators`), el("span", { class: "bar-backend" }, ""),
      bar(restUs / max, PALETTE[PALETTE.length - 1]), el("span", { class: "num" }, `${ms(restUs)} · ${percent(share)}`));
    bars.append(el("details", { id: "profile-rest" }, summary, rest.map((op) => operatorRow(op, max, colors))));
  }
  const legend = el("p", { class: "legend" }, backends.map((b) => {
    const swatch = el("span", { class: "swatch" });
    swatch.style.background = colors.get(b);
    return el("span", {}, swatch, b);
  }));
  return el("div", {}, legend, bars);
}

function summary(profile) {
  const { latency_us: latency, load_ms: load } = profile;
  const value = (field, v, text) => el("span", { "data-field": field, "data-value": v }, text);
  return pairs([
    ["latency p50 / p90", el("span", {}, value("p50", latency.p50, ms(latency.p50)), " / ", value("p90", latency.p90, ms(latency.p90)))],
    ["latency min / max", `${ms(latency.min)} / ${ms(latency.max)}`],
    ["load cold / warm", el("span", {}, value("cold", load.cold, `${load.cold.toFixed(2)} ms`), " / ", value("warm", load.warm, `${load.warm.toFixed(2)} ms`))],
    ["peak memory", value("peak_memory_bytes", profile.peak_memory_bytes, bytes(profile.peak_memory_bytes))],
    ["iterations", String(profile.iterations)],
  ], { class: "profile-summary" });
}

/** Why a method is slow: its non-delegated operators by kind, and its delegate subgraphs. */
export function delegationSummary(method, report) {
  if (!report) return "";
  const kinds = Object.entries(report.operators ?? {})
    .filter(([name, c]) => c.non_delegated > 0 && name !== "getitem") // getitem: a tuple's element, no kernel
    .sort((a, b) => b[1].non_delegated - a[1].non_delegated || a[0].localeCompare(b[0]));
  const perBackend = Object.entries(report.backends ?? {}).map(([b, c]) => `${b} ${c.delegated_subgraphs ?? 0}`).join(", ");
  const subgraphs = `${report.delegated_subgraphs ?? 0} delegate subgraphs${perBackend ? ` (${perBackend})` : ""}`;
  const portable = kinds.reduce((sum, [, c]) => sum + c.non_delegated, 0);
  const text = `${subgraphs}; ${portable} operators not delegated (portable kernels)${kinds.length ? ", by kind:" : ""}`;
  return el("div", { class: "delegation" },
    el("h4", {}, `Delegation of ${method}`),
    el("p", { id: `delegation-${method}-summary` }, text),
    kinds.length ? table(["operator kind not delegated", "count"],
      kinds.map(([name, c]) => el("tr", { "data-operator": name }, el("td", {}, name), el("td", { class: "num" }, String(c.non_delegated)))),
      { id: `delegation-${method}` }) : "");
}

/** A profile (GET /v1/jobs/{id}/profile): its figures and its operators as sorted bars. */
export function profileView(profile, jobId) {
  return el("div", { id: `profile-${profile.method}`, "data-job": jobId },
    el("h4", {}, `Profile of ${profile.method} (${profile.iterations} iterations)`),
    summary(profile), el("h4", {}, "Operators by time (summed over the traced runs)"), operatorBars(profile.operators));
}

/** Queue a profile job and follow it; its profile once it succeeded (else an Error). */
async function profileJob(artifact, method, iterations, onStatus) {
  const job = await api("/v1/profile-jobs", { method: "POST", body: { artifact_id: artifact.id, method, iterations } });
  onStatus(job);
  await streamEvents(`/v1/jobs/${job.id}/events`, (event, data) => event === "job" && onStatus(JSON.parse(data)));
  const done = await api(`/v1/jobs/${job.id}`);
  if (done.status !== "succeeded") {
    const why = done.error ? `: ${done.error.code}: ${done.error.message}` : "";
    throw new Error(`profile job ${job.id} ${done.status}${why}`);
  }
  return [job.id, await api(`/v1/jobs/${job.id}/profile`)];
}

async function run(artifact, method, iterations, target) {
  const progress = el("p", { class: "muted" }, `profiling ${method}…`);
  target.replaceChildren(progress);
  try {
    const [jobId, profile] = await profileJob(artifact, method, iterations, (job) => {
      progress.textContent = `profile job ${job.id}: ${job.status}${job.stage ? ` · ${job.stage}` : ""}`;
    });
    target.replaceChildren(profileView(profile, jobId));
  } catch (error) {
    target.replaceChildren(el("p", { class: "error" }, error.message));
  }
  target.append(delegationSummary(method, artifact.report?.methods?.[method]));
}

/** The profile card: one button per method, and the iterations to time. */
export function profileCard(artifact) {
  const target = el("div", { id: "profile-result" });
  const iterations = el("input", { id: "profile-iterations", type: "number", min: 1, max: 1000, value: DEFAULT_ITERATIONS });
  const count = () => Number(iterations.value) || DEFAULT_ITERATIONS;
  return el("div", { class: "card" }, el("h3", {}, "Profile"),
    el("label", {}, "Iterations ", iterations), " ",
    ...artifact.methods.map((m) => el("button", { "data-profile": m.name, onclick: () => run(artifact, m.name, count(), target) }, `Profile ${m.name}`)),
    target);
}
