// Chat tab: talk to a model whose latest version has a tokenizer, over POST
// /v1/chat/completions streamed as server-sent events (read with fetch), showing the time to
// the first token and the tokens per second. The page keeps the conversation and sends it
// whole each turn, with one X-Pteforge-Session key, so the server keeps the KV cache between
// turns and computes only the new tokens.
import { ApiError, api, streamEvents } from "./api.js";
import { el } from "./dom.js";
import { tokenizerOf } from "./models.js";
import { routeHash } from "./routes.js";

const SESSION_HEADER = "X-Pteforge-Session";
const MAX_MODELS = 1000; // the API's largest page

/** A fresh session key (crypto.randomUUID needs a secure context; this does not). */
function sessionKey() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return `dashboard-${Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")}`;
}

/** The models that can chat: those whose latest version has a tokenizer. */
export async function showChats(section) {
  const { data } = await api(`/v1/models?limit=${MAX_MODELS}`);
  const tokenizers = await Promise.all(data.map((m) => tokenizerOf(m.id, m.latest_version)));
  const models = data.filter((m, i) => tokenizers[i]);
  const item = (m) => el("li", { "data-model": m.id }, el("a", { href: routeHash("chat", m.id) }, m.id), ` (version ${m.latest_version})`);
  section.replaceChildren(
    el("h2", {}, "Chat"),
    models.length
      ? el("ul", { id: "chat-models" }, models.map(item))
      : el("p", { class: "muted" }, "No model has a tokenizer yet: PUT /v1/models/NAME/versions/VERSION/tokenizer."),
  );
}

function bubble(role, text = "") {
  const body = el("div", { class: "chat-text" }, text);
  return { node: el("div", { class: `chat-message ${role}`, "data-role": role }, el("div", { class: "muted" }, role), body), body };
}

/** The stats of a finished turn: time to first token, decode tokens per second. */
function stats(node, { started, first, ended, usage, finish }) {
  const tokens = usage?.completion_tokens ?? null;
  const ttft = first === null ? null : first - started;
  const rate = first !== null && tokens > 1 && ended > first ? (tokens - 1) / ((ended - first) / 1000) : null;
  const field = (id, value, text) => el("span", { id, "data-value": value ?? "" }, text);
  node.replaceChildren(
    "time to first token ", field("chat-ttft", ttft, ttft === null ? "n/a" : `${ttft.toFixed(1)} ms`),
    " · ", field("chat-tps", rate, rate === null ? "n/a" : `${rate.toFixed(1)} tokens/s`), " after the first",
    " · ", field("chat-tokens", tokens, `${tokens ?? "?"} tokens`), ` · finish: ${finish ?? "?"}`,
  );
}

/** One turn, streamed into reply; the timings and the reply's text. */
async function stream(name, chat, settings, reply, controller) {
  const turn = { started: performance.now(), first: null, ended: null, usage: null, finish: null, text: "" };
  const onEvent = (_event, data) => {
    if (!reply.isConnected) controller.abort(); // the page was left: free the server's worker
    if (data === "[DONE]") return;
    const chunk = JSON.parse(data);
    if (chunk.error) throw new ApiError(500, chunk.error.code ?? chunk.error.type, chunk.error.message);
    turn.usage = chunk.usage ?? turn.usage;
    const choice = chunk.choices?.[0];
    const piece = choice?.delta?.content ?? "";
    if (piece || choice?.finish_reason) turn.first ??= performance.now();
    turn.finish = choice?.finish_reason ?? turn.finish;
    turn.text += piece;
    reply.textContent = turn.text;
  };
  const body = { model: name, messages: chat.messages, stream: true, stream_options: { include_usage: true }, ...settings };
  await streamEvents("/v1/chat/completions", onEvent, controller.signal, { body, headers: { [SESSION_HEADER]: chat.session } });
  turn.ended = performance.now();
  return turn;
}

function settingsForm() {
  const maxTokens = el("input", { id: "chat-max-tokens", type: "number", min: 1, value: 128 });
  const temperature = el("input", { id: "chat-temperature", type: "number", min: 0, step: 0.1, value: 0 });
  const read = () => ({ max_tokens: Number(maxTokens.value) || 128, temperature: Number(temperature.value) || 0 });
  return { node: el("p", {}, el("label", {}, "max tokens ", maxTokens), " ", el("label", {}, "temperature ", temperature)), read };
}

/** The chat with one model: the conversation, a prompt box and the last turn's figures. */
export async function showChat(section, name) {
  const model = await api(`/v1/models/${encodeURIComponent(name)}`);
  if (!(await tokenizerOf(model.id, model.latest_version))) {
    section.replaceChildren(el("h2", {}, `Chat with ${model.id}`),
      el("p", { class: "error" }, `The latest version of ${model.id} has no tokenizer: attach one to chat with it.`));
    return;
  }
  const chat = { messages: [], session: sessionKey() };
  const log = el("div", { id: "chat-log" });
  const figures = el("p", { id: "chat-stats", class: "muted", "data-state": "idle" });
  const input = el("textarea", { id: "chat-input", rows: 3, placeholder: "Say something (Enter sends, Shift+Enter a new line)" });
  const send = el("button", { type: "submit", id: "chat-send" }, "Send");
  const settings = settingsForm();
  const submit = async (event) => {
    event.preventDefault();
    const text = input.value.trim();
    if (!text || send.disabled) return;
    input.value = "";
    send.disabled = true;
    chat.messages.push({ role: "user", content: text });
    const reply = bubble("assistant");
    log.append(bubble("user", text).node, reply.node);
    figures.dataset.state = "streaming";
    figures.textContent = "waiting for the first token…";
    const controller = new AbortController();
    try {
      const turn = await stream(model.id, chat, settings.read(), reply.body, controller);
      chat.messages.push({ role: "assistant", content: turn.text });
      stats(figures, turn);
      figures.dataset.state = "done";
    } catch (error) {
      chat.messages.pop(); // the failed turn is not part of the conversation
      reply.node.classList.add("failed");
      figures.replaceChildren(el("span", { class: "error" }, error.message));
      figures.dataset.state = "failed";
    } finally {
      send.disabled = false;
    }
  };
  const reset = () => {
    chat.messages = [];
    chat.session = sessionKey();
    log.replaceChildren();
    figures.replaceChildren();
    figures.dataset.state = "idle";
  };
  const form = el("form", { id: "chat-form", class: "card", onsubmit: submit }, input, el("div", {}, send, " ",
    el("button", { type: "button", id: "chat-reset", onclick: reset }, "New conversation")));
  input.addEventListener("keydown", (event) => {
    if (event.key !== "Enter" || event.shiftKey) return;
    event.preventDefault();
    form.requestSubmit();
  });
  section.replaceChildren(
    el("h2", {}, "Chat with ", el("span", { id: "chat-model" }, model.id), el("span", { class: "muted" }, ` (version ${model.latest_version})`)),
    settings.node, log, figures, form,
  );
}
