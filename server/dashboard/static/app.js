// The dashboard's entry point: sign-in, and one page per hash route (routes.js), so Back,
// Forward, bookmarks and reloads work. Each page draws into a view of its own: a page left
// before its data arrived draws into a detached view, never over the page now shown.
import { api, token } from "./api.js";
import { showArtifact, showArtifacts } from "./artifacts.js";
import { showChat, showChats } from "./chat.js";
import { el, say } from "./dom.js";
import { showJob, showJobs, stopWatching } from "./jobs.js";
import { showModel, showModels } from "./models.js";
import { showPrograms } from "./programs.js";
import { TABS, parseRoute, routeHash } from "./routes.js";

const $ = (id) => document.getElementById(id);

/** Go to a page: a new history entry, or a redraw when it is the page shown. */
function go(tab, id = null) {
  const hash = routeHash(tab, id);
  if (location.hash === hash) show();
  else location.hash = hash;
}

const nav = {
  programs: () => go("programs"),
  jobs: () => go("jobs"),
  job: (job) => go("jobs", job.id),
  artifacts: () => go("artifacts"),
  artifact: (id) => go("artifacts", id),
  models: () => go("models"),
  chat: () => go("chat"),
};

const PAGES = {
  programs: (view) => showPrograms(view, nav.job),
  jobs: (view, id) => (id ? showJob(view, id, nav) : showJobs(view, nav)),
  artifacts: (view, id) => (id ? showArtifact(view, id) : showArtifacts(view, nav)),
  models: (view, id) => (id ? showModel(view, id) : showModels(view)),
  chat: (view, id) => (id ? showChat(view, id) : showChats(view)),
};

function activate(tab) {
  for (const name of TABS) $(name).hidden = name !== tab;
  for (const button of document.querySelectorAll("#tabs button")) {
    button.classList.toggle("active", button.dataset.tab === tab);
  }
  return $(tab);
}

/** Draw the page of the current URL. */
async function show() {
  if (!token.get()) return;
  stopWatching();
  const { tab, id } = parseRoute(location.hash);
  if (location.hash !== routeHash(tab, id)) history.replaceState(null, "", routeHash(tab, id));
  const view = el("div", { class: "view" });
  activate(tab).replaceChildren(view);
  say("");
  try {
    await PAGES[tab](view, id);
  } catch (error) {
    if (view.isConnected) failed(error);
  }
}

function failed(error) {
  if (error.status === 401) signOut(`Your token is no longer accepted (401): ${error.detail}. Sign in again.`);
  else if (error.status === 0) say(`Network error: ${error.detail}. Reload the page to try again.`, true);
  else say(error.message, true);
}

function signedIn(on) {
  $("sign-in").hidden = on;
  $("tabs").hidden = !on;
  $("sign-out").hidden = !on;
  if (!on) for (const name of TABS) $(name).hidden = true;
}

/** Forget the token; the URL stays, so signing in again returns to the same page. */
function signOut(reason = "") {
  stopWatching();
  token.clear();
  signedIn(false);
  say(reason, Boolean(reason));
}

/** Try a token before keeping it: a refused one says why, on the sign-in form. */
async function signIn(value) {
  token.set(value);
  say("signing in…");
  try {
    await api("/v1/programs?limit=1");
  } catch (error) {
    if (error.status === 401 || error.status === 403) {
      signOut(`That token was not accepted (${error.status}): ${error.detail}`);
    } else signOut(`Could not sign in: ${error.status === 0 ? error.detail : error.message}`);
    return;
  }
  signedIn(true);
  show();
}

$("sign-in").addEventListener("submit", (event) => {
  event.preventDefault();
  const value = $("token").value.trim();
  $("token").value = "";
  signIn(value);
});
$("sign-out").addEventListener("click", () => signOut());
for (const button of document.querySelectorAll("#tabs button")) {
  button.addEventListener("click", () => nav[button.dataset.tab]());
}
window.addEventListener("hashchange", show);
signedIn(Boolean(token.get()));
show();
