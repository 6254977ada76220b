// Programs tab: uploaded programs with their methods' specs, and the compile form.
import { api } from "./api.js";
import { bytes, el, say, table } from "./dom.js";

const DEFAULT_PLAN = '{"all": {"partitioners": ["xnnpack"]}}';

const spec = (t) => `${t.name}: ${t.dtype}[${t.shape.join(", ")}]`;

function methodsTable(program) {
  return table(
    ["method", "inputs", "outputs"],
    program.methods.map((m) => [
      m.name,
      el("div", {}, m.inputs.map((t) => el("div", {}, spec(t)))),
      el("div", {}, m.outputs.map((t) => el("div", {}, spec(t)))),
    ]),
  );
}

/** The compile form: a program picker and a plan; onJob(job) gets the queued job. */
export function compileForm(programs, onJob, { programId, plan, prefix = "compile" } = {}) {
  const select = el(
    "select",
    { id: `${prefix}-program` },
    programs.map((p) => el("option", { value: p.id }, `${p.name} (${p.id})`)),
  );
  if (programId) select.value = programId;
  const text = el("textarea", { id: `${prefix}-plan`, rows: 4 });
  text.value = plan ?? DEFAULT_PLAN;
  const submit = async (event) => {
    event.preventDefault();
    let parsed;
    try {
      parsed = JSON.parse(text.value);
    } catch (error) {
      say(`the plan is not JSON: ${error.message}`, true);
      return;
    }
    try {
      const job = await api("/v1/compile-jobs", {
        method: "POST",
        body: { program_id: select.value, plan: parsed },
      });
      say(`job ${job.id} queued`);
      onJob(job);
    } catch (error) {
      say(error.message, true);
    }
  };
  return el(
    "form",
    { class: "card", id: `${prefix}-form`, onsubmit: submit },
    el("h3", {}, "Compile"),
    el("label", {}, "Program ", select),
    el("div", {}, el("label", { for: `${prefix}-plan` }, "Plan (JSON)")),
    text,
    el("div", {}, el("button", { type: "submit", id: `${prefix}-submit` }, "Compile")),
  );
}

/** Render the Programs tab into section. */
export async function showPrograms(section, onJob) {
  const { programs } = await api("/v1/programs");
  section.replaceChildren(el("h2", {}, `Programs (${programs.length})`));
  if (programs.length) section.append(compileForm(programs, onJob));
  for (const program of programs) {
    section.append(
      el(
        "div",
        { class: "card program", "data-program": program.id },
        el("h3", {}, `${program.name} `, el("span", { class: "muted" }, program.id)),
        el(
          "p",
          {},
          "size ",
          el("span", { class: "program-size", "data-bytes": program.size_bytes }, bytes(program.size_bytes)),
          ` · sha256 ${program.sha256.slice(0, 16)}… · ${program.created_at}`,
        ),
        methodsTable(program),
      ),
    );
  }
}
