// Short texts of the job and artifact lists: a plan per method, a program's name, why a
// job failed.
import { api } from "./api.js";
import { el } from "./dom.js";

const MAX_PROGRAMS = 1000; // the API's largest page

/** "xnnpack", "xnnpack+vulkan, quantize int8", "delegate X" or "portable". */
export function targetText(target) {
  const names = (target?.partitioners ?? []).map((p) => (typeof p === "string" ? p : p.name));
  const parts = names.length ? [names.join("+")] : [];
  if (target?.delegate) parts.push(`delegate ${target.delegate.backend_id}`);
  if (!parts.length) parts.push("portable");
  if (target?.quantize) parts.push(`quantize ${target.quantize}`);
  return parts.join(", ");
}

/** "forward: xnnpack; decode: portable": each method's target (methods, when known). */
export function planSummary(plan, methods = []) {
  if (!plan) return "";
  const named = plan.methods ?? {};
  const names = [...new Set([...methods, ...Object.keys(named)])];
  if (!names.length) return `all: ${targetText(plan.all)}`;
  return names.map((m) => `${m}: ${targetText(named[m] ?? plan.all)}`).join("; ");
}

/** The caller's programs by id (for names and method lists). */
export async function programIndex() {
  const { programs } = await api(`/v1/programs?limit=${MAX_PROGRAMS}`);
  return new Map(programs.map((p) => [p.id, p]));
}

/** A program cell: its name (its id on hover), or the bare id of a program not listed. */
export function programCell(programs, id) {
  if (!id) return el("td", { "data-field": "program" }, "");
  const program = programs.get(id);
  return el("td", { "data-field": "program", title: id }, program ? program.name : id);
}

/** A plan cell, its full JSON on hover. */
export function planCell(text, plan) {
  return el("td", { "data-field": "plan", title: plan ? JSON.stringify(plan) : "" }, el("code", {}, text));
}

/** Why a job failed (code: message) or was retried; "" for the others. */
export function reasonText(job) {
  if (job.error) return `${job.error.code}: ${job.error.message}`;
  return job.retry_reason ? `retried: ${job.retry_reason}` : "";
}

/** A cell of at most 120 characters, the whole text on hover. */
export function shortCell(text, field) {
  const short = text.length > 120 ? `${text.slice(0, 119)}…` : text;
  return el("td", { "data-field": field, title: text }, short);
}
