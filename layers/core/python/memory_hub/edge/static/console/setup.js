// The Key and scope card: paste a key, set team/agent/user (or pick a known memory), see the
// memory id, its formation setting and its counts.
import { call } from "./api.js";
import { refreshCounts } from "./counts.js";
import { $, el } from "./dom.js";
import { forgetKey, keepKey, loadScope, memoryId, saveScope, scope, scopeReady, storedKey } from "./session.js";
import { fail, say } from "./status.js";
import { checkConfirms } from "./tab-admin.js";
import { refreshFormationSetting } from "./tab-formation.js";
import { loadCurrent } from "./tabs.js";

function showKeyState() {
  $("key-state").textContent = storedKey()
    ? "A key is set for this tab (kept in session storage only; closing the tab forgets it)."
    : "No key set for this tab.";
}

function showScope() {
  const s = scope();
  const mid = memoryId(s);
  $("memory-id").textContent = mid || "— (set team and agent)";
  $("memory-formation").textContent = "—"; // read again with the counts
  $("clear-target").textContent = mid || "—";
  $("userdel-memory").textContent = mid || "—";
  $("export-target").textContent = mid || "—";
  $("userdel-user").textContent = s.user || "—";
  if (!$("audit-memory").dataset.touched) $("audit-memory").value = mid;
  checkConfirms();
}

let applying = 0; // the newest set-up: an older one still on its way says nothing more

async function applySetup() {
  const mine = ++applying;
  const pasted = $("key").value.trim();
  if (pasted && !keepKey(pasted)) {
    say("Error: this browser does not allow session storage; the console cannot keep the key.", "error");
    return;
  }
  $("key").value = ""; // the key is kept in session storage only, not in the page
  showKeyState();
  saveScope();
  showScope();
  if (!storedKey()) { say("Error: paste an API key first.", "error"); $("key").focus(); return; }
  if (!scopeReady()) { say("Error: set team, agent and user id.", "error"); return; }
  say("Checking the key…", "busy");
  // a newer set-up (another scope applied at once) takes over: this one's Ready would name its scope
  // before its counts are shown
  if (!(await refreshCounts()) || mine !== applying) return;
  await refreshFormationSetting();
  if (mine !== applying) return;
  await loadCurrent();
  if (mine !== applying) return;
  const box = $("status");
  if (!box.classList.contains("error")) say(`Ready: ${memoryId()}, user ${scope().user}. ${box.textContent}`, "ok");
}

// Known memories (memory/list needs an admin key): picking one fills team and agent.
async function listMemories() {
  const team = $("team").value.trim();
  const pick = $("memory-pick");
  say("Listing memories…", "busy");
  try {
    const found = [];
    let next = null;
    for (let page = 0; page < 10; page += 1) {
      const body = { limit: 100 };
      if (team) body.team_id = team;
      if (next) body.next_token = next;
      const data = await call("v3/memory/list", body, { scoped: false });
      found.push(...(data.items || []));
      next = data.next_token || null;
      if (!next) break;
    }
    pick.replaceChildren(el("option", { value: "" }, found.length ? "— choose a memory —" : "— none found —"),
      ...found.map((asset) => el("option", { value: asset.memory_id, "data-team": asset.team_id, "data-agent": asset.agent_id },
        `${asset.name ? `${asset.memory_id} (${asset.name})` : asset.memory_id} · formation ${asset.formation}`)));
    pick.disabled = found.length === 0;
    say(`${found.length} memories listed${team ? ` for team ${team}` : ""}${next ? " (first 1000)" : ""}.`, "ok");
    if (found.length) pick.focus();
  } catch (error) {
    fail(error);
  }
}

$("setup-form").addEventListener("submit", (event) => { event.preventDefault(); applySetup(); });
$("forget-key").addEventListener("click", () => {
  forgetKey();
  $("key").value = "";
  showKeyState();
  say("The key is forgotten for this tab.", "ok");
});
for (const id of ["team", "agent", "user", "service"]) $(id).addEventListener("input", showScope);
$("counts-refresh").addEventListener("click", refreshCounts);
$("memory-list").addEventListener("click", listMemories);
$("memory-pick").addEventListener("change", () => {
  const option = $("memory-pick").selectedOptions[0];
  if (!option || !option.value) return;
  $("team").value = option.dataset.team;
  $("agent").value = option.dataset.agent;
  showScope();
  say(`Picked ${option.value}; set the user id, then use this key and scope.`, "info");
});

// The first paint: the tab's stored scope, and straight to work when a key is kept already.
export function start() {
  loadScope();
  showKeyState();
  showScope();
  if (storedKey() && scopeReady()) applySetup();
  else say("Paste an API key and set team, agent and user to start.", "info");
}
