// Hash routes, one per page: #/programs, #/jobs, #/jobs/ID, #/artifacts, #/artifacts/ID,
// #/models, #/models/NAME, #/chat, #/chat/NAME. The page at / serves them all, so a route
// can be bookmarked, reloaded and shared, and the browser's Back and Forward move between
// pages. The token never goes in a URL.
export const TABS = ["programs", "jobs", "artifacts", "models", "chat"];

/** {tab, id} of a location hash; anything unknown is the Programs tab. */
export function parseRoute(hash) {
  const [tab, id] = hash.replace(/^#\/?/, "").split("/");
  if (!TABS.includes(tab) || tab === "programs") return { tab: "programs", id: null };
  return { tab, id: id ? decodeURIComponent(id) : null };
}

/** The hash of a page: a tab, or one job, artifact or model of it. */
export function routeHash(tab, id = null) {
  return id ? `#/${tab}/${encodeURIComponent(id)}` : `#/${tab}`;
}
