// The tab's key and scope: the key lives only in this tab's sessionStorage (never in a URL or a
// cookie), the scope in the Key and scope form (and sessionStorage, so a reload keeps it).
import RULES from "./rules.js";
import { $ } from "./dom.js";

const KEY_ITEM = "memoryHub.console.key";
const SCOPE_ITEM = "memoryHub.console.scope";

export function storedKey() {
  try { return sessionStorage.getItem(KEY_ITEM) || ""; } catch (_) { return ""; }
}

// False when the browser keeps no session storage.
export function keepKey(key) {
  try { sessionStorage.setItem(KEY_ITEM, key); return true; } catch (_) { return false; }
}

export function forgetKey() {
  try { sessionStorage.removeItem(KEY_ITEM); } catch (_) { /* nothing stored */ }
}

export function scope() {
  return {
    service: $("service").value.trim() || "default",
    team: $("team").value.trim(),
    agent: $("agent").value.trim(),
    user: $("user").value, // user ids may hold spaces: sent exactly as typed
  };
}

export function scopeReady() {
  const s = scope();
  return Boolean(s.team && s.agent && s.user);
}

// The pair's memory_id, spelled as the server spells it (its template comes with the rules).
export function memoryId(s = scope()) {
  if (!(s.team && s.agent)) return "";
  return RULES.memory_id.replace(/\{(team_id|agent_id)\}/g, (_, name) => (name === "team_id" ? s.team : s.agent));
}

// The memory of the scope's pair, named with the pair itself: another pair may spell the same
// memory_id (team "a-b" + agent "c", team "a" + agent "b-c"), and the id alone is then ambiguous.
export function named(s = scope()) {
  return { memory_id: memoryId(s), team_id: s.team, agent_id: s.agent };
}

export function saveScope() {
  const s = scope();
  try { sessionStorage.setItem(SCOPE_ITEM, JSON.stringify(s)); } catch (_) { /* storage off */ }
}

export function loadScope() {
  try {
    const s = JSON.parse(sessionStorage.getItem(SCOPE_ITEM) || "null");
    if (s) {
      $("service").value = s.service || "default";
      $("team").value = s.team || "";
      $("agent").value = s.agent || "";
      $("user").value = s.user || "";
    }
  } catch (_) { /* ignore a bad stored value */ }
}
