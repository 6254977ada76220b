// Artifacts tab: the report as tables and charts, the numerics check, a profile, download.
import { api, download } from "./api.js";
import { PALETTE, stackedBars } from "./charts.js";
import { bytes, el, pairs, say, table, toolchainText } from "./dom.js";
import { routeHash } from "./routes.js";
import { profileCard } from "./profile.js";
import { planCell, planSummary, programCell, programIndex } from "./summaries.js";

const fmt = (v) => (typeof v === "number" && !Number.isInteger(v) ? v.toPrecision(4) : String(v));

function operatorsCard(report) {
  const methods = Object.entries(report.methods ?? {});
  const backends = [...new Set(methods.flatMap(([, m]) => Object.keys(m.backends ?? {})))].sort();
  const rows = methods.map(([name, m]) =>
    el(
      "tr",
      { "data-method": name },
      el("td", {}, name),
      ...backends.map((b) => el("td", { class: "num", "data-backend": b }, String(m.backends?.[b]?.delegated_operators ?? 0))),
      el("td", { class: "num", "data-field": "delegated_operators" }, String(m.delegated_operators ?? 0)),
      el("td", { class: "num", "data-field": "non_delegated_operators" }, String(m.non_delegated_operators ?? 0)),
      el("td", { class: "num", "data-field": "delegated_subgraphs" }, String(m.delegated_subgraphs ?? 0)),
    ),
  );
  const head = ["method", ...backends.map((b) => `${b} ops`), "delegated", "not delegated", "subgraphs"];
  const series = [...backends, "not delegated"].map((name, i) => ({ name, color: PALETTE[i % PALETTE.length] }));
  const chartRows = methods.map(([name, m]) => ({
    label: name,
    values: [...backends.map((b) => m.backends?.[b]?.delegated_operators ?? 0), m.non_delegated_operators ?? 0],
  }));
  return el(
    "div",
    { class: "card" },
    el("h3", {}, "Operators per method and backend"),
    table(head, rows, { id: "operators-table" }),
    methods.length ? stackedBars(chartRows, series) : "",
    ...methods.map(([name, m]) => operatorDetail(name, m)),
  );
}

function operatorDetail(name, method) {
  const ops = Object.entries(method.operators ?? {});
  if (!ops.length) return "";
  return el(
    "details",
    {},
    el("summary", {}, `${name}: ${ops.length} operator kinds`),
    table(["operator", "delegated", "not delegated"], ops.map(([op, c]) => [op, c.delegated, c.non_delegated])),
  );
}

function numericRows(object) {
  return Object.entries(object ?? {}).filter(([, v]) => typeof v === "number");
}

function sizeCard(artifact) {
  const report = artifact.report;
  const rows = [["pte file", "size_bytes", artifact.size_bytes]];
  for (const [key, value] of numericRows(report.program)) rows.push(["program", key, value]);
  for (const [key, value] of numericRows(report.pte_layout)) rows.push(["file layout", key, value]);
  for (const [name, m] of Object.entries(report.methods ?? {})) {
    for (const [key, value] of numericRows(m)) if (key.endsWith("bytes")) rows.push([`method ${name}`, key, value]);
  }
  const body = rows.map(([scope, key, value]) =>
    el("tr", { "data-size": `${scope}/${key}` }, el("td", {}, scope), el("td", {}, key),
      el("td", { class: "num", "data-bytes": value }, String(value)), el("td", { class: "num" }, bytes(value))),
  );
  const parts = numericRows(report.pte_layout).filter(([k]) => k !== "pte_bytes");
  const program = report.program ?? {};
  const chart = parts.length
    ? stackedBars([{ label: "file", values: parts.map(([, v]) => v) }],
        parts.map(([k], i) => ({ name: k, color: PALETTE[i % PALETTE.length] })), bytes)
    : stackedBars([{ label: "constants", values: [program.unique_constant_bytes ?? 0, program.shared_constant_bytes ?? 0] },
        { label: "rest of file", values: [Math.max(0, artifact.size_bytes - (program.constant_bytes ?? 0)), 0] }],
        [{ name: "unique", color: PALETTE[0] }, { name: "shared across methods", color: PALETTE[1] }], bytes);
  return el("div", { class: "card" }, el("h3", {}, "Size"), table(["scope", "field", "bytes", ""], body, { id: "size-table" }), chart);
}

function numericsCard(numerics) {
  if (!numerics) return el("div", { class: "card" }, el("h3", {}, "Numerics"), el("p", { class: "muted" }, "No numerics check for this artifact."));
  const rows = [];
  for (const [method, m] of Object.entries(numerics.methods ?? {})) {
    for (const out of m.outputs ?? []) {
      rows.push(el("tr", { "data-numerics": `${method}/${out.name}` }, el("td", {}, method), el("td", {}, out.name),
        ...["max_abs_error", "max_rel_error", "sqnr_db"].map((k) => el("td", { class: "num", "data-field": k, "data-value": out[k] }, fmt(out[k]))),
        el("td", { class: `status-${m.status}` }, m.status)));
    }
    if (!(m.outputs ?? []).length) rows.push([method, "", "", "", "", m.status ?? ""]);
  }
  return el("div", { class: "card" },
    el("h3", {}, "Numerics ", el("span", { id: "numerics-status", class: `status-${numerics.status}` }, numerics.status)),
    table(["method", "output", "max abs error", "max rel error", "SQNR dB", "status"], rows, { id: "numerics-table" }));
}

/** The program's name and id, or its bare id when it is gone. */
async function programText(id) {
  if (!id) return "uploaded .pte";
  const program = await api(`/v1/programs/${id}`).catch(() => null);
  return program ? `${program.name} · ${id}` : id;
}

/** The artifact's actions: its .pte, its .ptd (the data a program-data-separated .pte
 * loads with) and .bpte, and deploying it as a model's next version. */
function actions(artifact) {
  const save = (kind) => () =>
    download(`/v1/artifacts/${artifact.id}/${kind}`, `${artifact.id}.${kind}`).catch((e) => say(e.message, true));
  const name = el("input", { id: "deploy-name", placeholder: "model name", required: "" });
  const deploy = async (event) => {
    event.preventDefault();
    try {
      const created = await api(`/v1/models/${encodeURIComponent(name.value)}/versions`, {
        method: "POST", body: { artifact_id: artifact.id } });
      window.location.hash = routeHash("models", created.name);
    } catch (e) {
      say(e.message, true);
    }
  };
  return el("div", { class: "actions" },
    el("button", { id: "artifact-download", onclick: save("pte") }, "Download .pte"), " ",
    ...(artifact.data ? [el("button", { id: "artifact-download-data", title: "the data the .pte loads with",
      onclick: save("ptd") }, "Download .ptd"), " "] : []),
    el("button", { id: "artifact-download-bundled", title: "with each method's numerics-check inputs and expected outputs",
      onclick: save("bpte") }, "Download bundled .bpte"), " ",
    el("form", { id: "deploy-form", class: "inline", onsubmit: deploy }, name, " ",
      el("button", { type: "submit" }, "Deploy as model")));
}

/** Show one artifact's report. */
export async function showArtifact(section, artifactId) {
  const artifact = await api(`/v1/artifacts/${artifactId}`);
  section.replaceChildren(
    el("h2", {}, "Artifact ", el("span", { class: "muted", id: "artifact-id" }, artifact.id)),
    pairs([["program", el("span", { id: "artifact-program" }, await programText(artifact.program_id))],
      ["sha256", artifact.sha256], ["size", bytes(artifact.size_bytes)],
      ...(artifact.data ? [["data (.ptd)", el("span", { id: "artifact-data" },
        `${bytes(artifact.data.size_bytes)} · ${artifact.data.sha256}`)]] : []),
      ["plan", el("code", {}, JSON.stringify(artifact.plan))], ["toolchain", el("span", { id: "artifact-toolchain" }, toolchainText(artifact.toolchain))],
      ["created", artifact.created_at]]),
    actions(artifact),
    operatorsCard(artifact.report), sizeCard(artifact), numericsCard(artifact.numerics), profileCard(artifact));
}

function artifactRow(a, programs, nav) {
  const plan = a.program_id ? planSummary(a.plan, a.methods.map((m) => m.name)) : "uploaded .pte";
  const open = (event) => event.target.closest("a") || nav.artifact(a.id);
  return el("tr", { class: "clickable", "data-artifact": a.id, onclick: open },
    el("td", {}, el("a", { href: routeHash("artifacts", a.id) }, a.id)), programCell(programs, a.program_id),
    planCell(plan, a.plan), el("td", { class: "num" }, bytes(a.size_bytes)),
    el("td", {}, a.numerics?.status ?? ""), el("td", {}, toolchainText(a.toolchain)), el("td", {}, a.created_at));
}

/** The artifact list; clicking a row opens the artifact. */
export async function showArtifacts(section, nav) {
  const [{ artifacts }, programs] = await Promise.all([api("/v1/artifacts"), programIndex()]);
  section.replaceChildren(el("h2", {}, `Artifacts (${artifacts.length})`),
    table(["artifact", "program", "plan", "size", "numerics", "toolchain", "created"],
      artifacts.map((a) => artifactRow(a, programs, nav)), { id: "artifacts-table" }));
}
