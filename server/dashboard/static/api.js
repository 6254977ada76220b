// API access: the bearer token lives in sessionStorage only, never in a URL.
const KEY = "pteforge.token";

export const token = {
  get: () => sessionStorage.getItem(KEY),
  set: (value) => sessionStorage.setItem(KEY, value),
  clear: () => sessionStorage.removeItem(KEY),
};

export class ApiError extends Error {
  constructor(status, code, message) {
    super(`${status} ${code}: ${message}`);
    this.status = status;
    this.code = code;
    this.detail = message; // the API's own words (error.message of its body)
  }
}

/** fetch, with a network failure (no answer at all) as an ApiError of status 0. */
async function send(path, init) {
  try {
    return await fetch(path, init);
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new ApiError(0, "network_error", `the server could not be reached (${error.message})`);
  }
}

function headers(extra = {}) {
  return { Authorization: `Bearer ${token.get()}`, ...extra };
}

async function failure(response) {
  let code = "http_error";
  let message = response.statusText;
  try {
    const body = await response.json();
    code = body.error?.code ?? code;
    message = body.error?.message ?? JSON.stringify(body);
  } catch {
    /* not JSON */
  }
  return new ApiError(response.status, code, message);
}

/** GET or POST JSON; throws ApiError on a non-2xx answer. */
export async function api(path, { method = "GET", body } = {}) {
  const init = { method, headers: headers() };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await send(path, init);
  if (!response.ok) throw await failure(response);
  return response.status === 204 ? null : response.json();
}

/** Fetch a file with the bearer header and hand it to the browser as a download. */
export async function download(path, filename) {
  const response = await send(path, { headers: headers() });
  if (!response.ok) throw await failure(response);
  const url = URL.createObjectURL(await response.blob());
  const link = document.createElement("a");
  link.href = url;
  link.download = filename;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

function parseBlock(block) {
  const message = { event: "message", data: [], id: null };
  for (const line of block.split("\n")) {
    if (!line || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "event") message.event = value;
    else if (field === "data") message.data.push(value);
    else if (field === "id") message.id = value;
  }
  return message.data.length ? { ...message, data: message.data.join("\n") } : null;
}

/** The next chunk of a stream; a connection lost mid-stream is an ApiError of status 0. */
async function read(reader) {
  try {
    return await reader.read();
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new ApiError(0, "network_error", `the connection to the server was lost (${error.message})`);
  }
}

/**
 * Server-sent events read with fetch (EventSource cannot send the Authorization header).
 * Calls onEvent(name, data) for each message until the stream ends or signal aborts; a
 * JSON body makes it a POST, with extra headers (a chat's session, say).
 */
export async function streamEvents(path, onEvent, signal, { body, headers: extra = {} } = {}) {
  const init = { headers: headers({ Accept: "text/event-stream", ...extra }), signal };
  if (body !== undefined) {
    init.method = "POST";
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await send(path, init);
  if (!response.ok) throw await failure(response);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await read(reader);
    if (done) return;
    buffer = (buffer + value).replace(/\r\n?/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const message = parseBlock(buffer.slice(0, end));
      buffer = buffer.slice(end + 2);
      if (message) onEvent(message.event, message.data);
    }
  }
}
