// The dashboard's entry point: sign-in, tabs and navigation between pages.
import { token } from "./api.js";
import { showArtifact, showArtifacts } from "./artifacts.js";
import { say } from "./dom.js";
import { showJob, showJobs } from "./jobs.js";
import { showPrograms } from "./programs.js";

const TABS = ["programs", "jobs", "artifacts"];
const $ = (id) => document.getElementById(id);

function activate(tab) {
  for (const name of TABS) $(name).hidden = name !== tab;
  for (const button of document.querySelectorAll("#tabs button")) {
    button.classList.toggle("active", button.dataset.tab === tab);
  }
  return $(tab);
}

async function guarded(render) {
  try {
    say("");
    await render();
  } catch (error) {
    if (error.status === 401) signOut("the token was refused (401): sign in again");
    else say(error.message, true);
  }
}

const nav = {
  programs: () => guarded(() => showPrograms(activate("programs"), nav.job)),
  jobs: () => guarded(() => showJobs(activate("jobs"), nav)),
  job: (job) => guarded(() => showJob(activate("jobs"), job.id, nav)),
  artifacts: () => guarded(() => showArtifacts(activate("artifacts"), nav)),
  artifact: (id) => guarded(() => showArtifact(activate("artifacts"), id)),
};

function signedIn(on) {
  $("sign-in").hidden = on;
  $("tabs").hidden = !on;
  $("sign-out").hidden = !on;
  if (!on) for (const name of TABS) $(name).hidden = true;
}

function signOut(reason = "") {
  token.clear();
  signedIn(false);
  $("toolchain").textContent = "";
  say(reason, Boolean(reason));
}

async function start() {
  signedIn(true);
  await nav.programs();
}

$("sign-in").addEventListener("submit", (event) => {
  event.preventDefault();
  token.set($("token").value.trim());
  $("token").value = "";
  start();
});
$("sign-out").addEventListener("click", () => signOut());
for (const button of document.querySelectorAll("#tabs button")) {
  button.addEventListener("click", () => nav[button.dataset.tab]());
}
if (token.get()) start();
else signedIn(false);
