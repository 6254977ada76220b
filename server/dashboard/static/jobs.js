// Jobs tab: the job list, and one job's live stages over its event stream.
import { api, streamEvents } from "./api.js";
import { el, pairs, say, seconds, table, toolchainText } from "./dom.js";
import { compileForm } from "./programs.js";

const TERMINAL = new Set(["succeeded", "failed", "canceled"]);
let watching = null; // AbortController of the stream on screen

const statusCell = (s) => el("span", { class: `status-${s}` }, s);

function summary(job) {
  const rows = [
    ["job", el("span", { id: "job-id" }, job.id)],
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
    // A job's JSON names no program; a finished job's artifact names its program and plan.
    const built = job.artifact_id ? await api(`/v1/artifacts/${job.artifact_id}`) : null;
    const { programs } = await api("/v1/programs");
    const plan = built ? JSON.stringify(built.plan) : undefined;
    const form = compileForm(programs, nav.job, { programId: built?.program_id, plan, prefix: "again" });
    form.querySelector("h3").textContent = "Compile again with another plan";
    card.replaceChildren(form);
  } catch (error) {
    say(error.message, true);
  }
}

/** Show one job, following its event stream until it ends. */
export async function showJob(section, jobId, nav) {
  watching?.abort();
  const job = await api(`/v1/jobs/${jobId}`);
  const head = el("div", { id: "job-head" }, summary(job));
  const stages = el("ol", { class: "stages", id: "job-stages" });
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
        redraw(current);
      },
      controller.signal,
    );
    redraw(await api(`/v1/jobs/${jobId}`)); // the terminal state with its artifact and times
  } catch (error) {
    if (error.name !== "AbortError") say(error.message, true);
  }
}

/** The job list; clicking a row opens the job. */
export async function showJobs(section, nav) {
  watching?.abort();
  const { jobs } = await api("/v1/jobs");
  const rows = jobs.map((job) =>
    el(
      "tr",
      { class: "clickable", "data-job": job.id, onclick: () => nav.job(job) },
      el("td", {}, job.id),
      el("td", {}, statusCell(job.status)),
      el("td", {}, job.stage ?? ""),
      el("td", {}, job.created_at),
      el("td", { class: "num" }, seconds(job.created_at, job.started_at)),
      el("td", { class: "num" }, seconds(job.started_at, job.finished_at)),
    ),
  );
  section.replaceChildren(
    el("h2", {}, `Jobs (${jobs.length})`),
    table(["job", "status", "stage", "created", "queue wait", "duration"], rows, { id: "jobs-table" }),
  );
}
