// Models tab: the project's model names with their versions (GET /v1/models/...), each
// version linked to the artifact it serves; a model with a tokenizer links to its chat.
import { api } from "./api.js";
import { el, table } from "./dom.js";
import { routeHash } from "./routes.js";

const MAX_MODELS = 1000; // the API's largest page

const unixTime = (seconds) => new Date(seconds * 1000).toISOString();

/** The tokenizer of a model version, or null when it has none (404). */
export async function tokenizerOf(name, version) {
  if (version === null || version === undefined) return null;
  try {
    return await api(`/v1/models/${encodeURIComponent(name)}/versions/${version}/tokenizer`);
  } catch (error) {
    if (error.status === 404) return null;
    throw error;
  }
}

function versionRow(model, v) {
  const latest = v.version === model.latest_version;
  return el(
    "tr",
    { "data-version": v.version, "data-latest": String(latest), class: latest ? "latest" : undefined },
    el("td", { class: "num", "data-field": "version" }, String(v.version)),
    el("td", { "data-field": "artifact" }, el("a", { href: routeHash("artifacts", v.artifact_id) }, v.artifact_id)),
    el("td", { "data-field": "created" }, v.created_at),
    el("td", { "data-field": "latest" }, latest ? "latest" : ""),
  );
}

/** A model's card: its name, latest version and versions, newest first. */
function modelCard(model, extra = "") {
  const versions = [...model.versions].sort((a, b) => b.version - a.version);
  const latest = model.latest_version ?? "none (every version was deleted)";
  return el(
    "div",
    { class: "card model", "data-model": model.id },
    el("h3", {}, el("a", { href: routeHash("models", model.id) }, model.id)),
    el("p", {}, `latest version `, el("span", { "data-field": "latest-version" }, String(latest)),
      ` · created ${unixTime(model.created)} · project ${model.owned_by}`),
    extra,
    table(["version", "artifact", "created", ""], versions.map((v) => versionRow(model, v)), { class: "versions" }),
  );
}

const detail = (name) => api(`/v1/models/${encodeURIComponent(name)}`);

/** The model list, each with its versions. */
export async function showModels(section) {
  const { data } = await api(`/v1/models?limit=${MAX_MODELS}`);
  const models = await Promise.all(data.map((m) => detail(m.id)));
  section.replaceChildren(el("h2", {}, `Models (${models.length})`));
  if (!models.length) {
    section.append(el("p", { class: "muted" }, "No models yet: POST /v1/models/NAME/versions with an artifact id, or pteforge deploy ART NAME."));
  }
  for (const model of models) section.append(modelCard(model));
}

/** One model and its versions, with a link to its chat when its latest version has a tokenizer. */
export async function showModel(section, name) {
  const model = await detail(name);
  const tokenizer = await tokenizerOf(model.id, model.latest_version);
  const chat = tokenizer
    ? el("p", {}, el("a", { id: "model-chat", href: routeHash("chat", model.id) }, `Chat with ${model.id}`))
    : "";
  section.replaceChildren(
    el("h2", {}, "Model ", el("span", { class: "muted", id: "model-name" }, model.id)),
    modelCard(model, chat),
  );
}
