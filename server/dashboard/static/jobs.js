// Jobs tab: the job list, and one job's live stages over its event stream.
import { api, streamEvents } from "./api.js";
import { el, pairs, say, seconds, table, toolchainText } from "./dom.js";
import { compileForm } from "./programs.js";
import { routeHash } from "./routes.js";
import { profileView } from "./profile.js";
import { planCell, planSummary, programCell, programIndex, reasonText, shortCell } from "./summaries.js";
import { timingsCard } from "./timings.js";

const TERMINAL = new Set(["succeeded", "failed", "canceled"]);
let watching = null; // AbortController of the stream on screen

const statusCell = (s) => el("span", { class: `status-${s}` }, s);

/** Stop following the job on screen (another page is about to show). */
export function stopWatching() {
  watching?.abort();
  watching = null;
}

function summary(job) {
  const rows = [
    ["job", el("span", { id: "job-id" }, job.id)],
    ["kind", job.kind],
    ["program", job.program_id ?? ""],
    ["plan", el("code", { id: "job-plan", title: JSON.stringify(job.plan) }, planSummary(job.plan))],
    ["status", el("span", { id: "job-status" }, statusCell(job.status))],
    ["stage", job.stage ?? ""],
    ["attempt", String(job.attempt)],
    ["queue wait", el("span", { id: "job-wait" }, seconds(job.created_at, job.started_at))],
    ["duration", el("span", { id: "job-duration" }, seconds(job.started_at, job.finished_at))],
    ["toolchain", toolchainText(job.toolchain)],
  ];
  if (job.error) rows.push(["error", el("pre", { class: "error", id: "job-error" }, `${job.error.code}: ${job.error.message}`)]);
  if (job.retry_reason) rows.push(["retried because", job.retry_reason]);
  return pairs(rows, { id: "job-summary" });
}

function stageItem(job) {
  const text = job.stage ? `${job.status} · ${job.stage}` : job.status;
  return el("li", { "data-status": job.status, "data-stage": job.stage ?? "" }, text);
}

async function cancel(job, redraw) {
  try {
    await api(`/v1/jobs/${job.id}/cancel`, { method: "POST" });
    say(`cancel requested for ${job.id}`);
    redraw();
  } catch (error) {
    say(error.message, true);
  }
}

function actions(job, nav, redraw) {
  const card = el("div", { class: "card" });
  if (!TERMINAL.has(job.status)) {
    card.append(el("button", { id: "job-cancel", onclick: () => cancel(job, redraw) }, "Cancel"));
  }
  if (job.artifact_id) {
    card.append(
      el("button", { id: "job-artifact", onclick: () => nav.artifact(job.artifact_id) }, `Open artifact ${job.artifact_id}`),
    );
  }
  return card;
}

async function again(job, nav, card) {
  try {
    const { programs } = await api("/v1/programs");
    const plan = job.plan ? JSON.stringify(job.plan) : undefined;
    const form = compileForm(programs, nav.job, { programId: job.program_id, plan, prefix: "again" });
    form.querySelector("h3").textContent = "Compile again with another plan";
    card.replaceChildren(form);
  } catch (error) {
    say(error.message, true);
  }
}

/** Show one job, following its event stream until it ends. */
export async function showJob(section, jobId, nav) {
  stopWatching();
  const job = await api(`/v1/jobs/${jobId}`);
  const head = el("div", { id: "job-head" }, summary(job));
  const stages = el("ol", { class: "stages", id: "job-stages" });
  const events = [];
  const timings = el("div", {}, timingsCard(events));
  const buttons = el("div", {});
  const againCard = el("div", {});
  let latest = job;
  const redraw = (current) => {
    latest = current;
    head.replaceChildren(summary(current));
    buttons.replaceChildren(actions(current, nav, () => showJob(section, jobId, nav)));
  };
  redraw(job);
  section.replaceChildren(
    el("h2", {}, "Job ", el("span", { class: "muted" }, job.id)),
    head,
    el("h3", {}, "Stages (live)"),
    stages,
    timings,
    buttons,
    el("button", { id: "job-again", onclick: () => again(latest, nav, againCard) }, "Compile again with another plan…"),
    againCard,
  );
  const controller = new AbortController();
  watching = controller;
  try {
    await streamEvents(
      `/v1/jobs/${jobId}/events`,
      (event, data) => {
        if (event !== "job") return;
        const current = JSON.parse(data);
        stages.append(stageItem(current));
        events.push(current);
        timings.replaceChildren(timingsCard(events));
        redraw(current);
      },
      controller.signal,
    );
    const done = await api(`/v1/jobs/${jobId}`); // the terminal state with its artifact and times
    redraw(done);
    if (done.kind === "profile" && done.status === "succeeded") {
      timings.after(profileView(await api(`/v1/jobs/${jobId}/profile`), jobId));
    }
  } catch (error) {
    if (error.name !== "AbortError") throw error;
  }
}

function jobRow(job, programs, nav) {
  const methods = programs.get(job.program_id)?.methods.map((m) => m.name) ?? [];
  const open = (event) => event.target.closest("a") || nav.job(job);
  return el(
    "tr",
    { class: "clickable", "data-job": job.id, onclick: open },
    el("td", {}, el("a", { href: routeHash("jobs", job.id) }, job.id)),
    el("td", { "data-field": "kind" }, job.kind),
    programCell(programs, job.program_id),
    planCell(planSummary(job.plan, methods), job.plan),
    el("td", {}, statusCell(job.status)),
    shortCell(reasonText(job), "reason"),
    el("td", { class: "num", "data-field": "attempt" }, String(job.attempt)),
    el("td", {}, job.stage ?? ""),
    el("td", {}, job.created_at),
    el("td", { class: "num" }, seconds(job.created_at, job.started_at)),
    el("td", { class: "num" }, seconds(job.started_at, job.finished_at)),
  );
}

/** The job list; clicking a row opens the job. */
export async function showJobs(section, nav) {
  stopWatching();
  const [{ jobs }, programs] = await Promise.all([api("/v1/jobs"), programIndex()]);
  const head = ["job", "kind", "program", "plan", "status", "reason", "attempt", "stage", "created", "queue wait", "duration"];
  section.replaceChildren(
    el("h2", {}, `Jobs (${jobs.length})`),
    table(head, jobs.map((job) => jobRow(job, programs, nav)), { id: "jobs-table" }),
  );
}
