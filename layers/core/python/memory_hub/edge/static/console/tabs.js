// The tab list (arrow keys, Home, End) and what each tab reads when it is shown or after a change.
import { $ } from "./dom.js";
import { scopeReady, storedKey } from "./session.js";

const loaders = {};
const refreshers = {};
const tabs = Array.from(document.querySelectorAll('[role="tab"]'));

// load: what showing the tab reads; refresh: what it reads again after a record changed.
export function onTab(id, { load, refresh }) {
  if (load) loaders[id] = load;
  if (refresh) refreshers[id] = refresh;
}

export function currentTab() {
  return tabs.find((tab) => tab.getAttribute("aria-selected") === "true") || tabs[0];
}

export function selectTab(tab, focus = false) {
  for (const other of tabs) {
    const selected = other === tab;
    other.setAttribute("aria-selected", String(selected));
    other.tabIndex = selected ? 0 : -1;
    $(other.getAttribute("aria-controls")).hidden = !selected;
  }
  if (focus) tab.focus();
  const load = loaders[tab.id];
  if (load && storedKey() && scopeReady()) load();
}

export async function loadCurrent() {
  const load = loaders[currentTab().id];
  if (load) await load();
}

export async function refreshCurrent() {
  const refresh = refreshers[currentTab().id];
  if (refresh) await refresh();
}

tabs.forEach((tab, index) => {
  tab.addEventListener("click", () => selectTab(tab));
  tab.addEventListener("keydown", (event) => {
    let next = null;
    if (event.key === "ArrowRight") next = tabs[(index + 1) % tabs.length];
    else if (event.key === "ArrowLeft") next = tabs[(index - 1 + tabs.length) % tabs.length];
    else if (event.key === "Home") next = tabs[0];
    else if (event.key === "End") next = tabs[tabs.length - 1];
    if (next) { event.preventDefault(); selectTab(next, true); }
  });
});
