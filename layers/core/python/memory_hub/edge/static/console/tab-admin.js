// Erase and export: clear a memory, delete a user's memory (each after retyping what it names),
// and export a memory-tdai tree.
import { ApiError, call } from "./api.js";
import { refreshCounts } from "./counts.js";
import { $ } from "./dom.js";
import { memoryId, named, scope } from "./session.js";
import { describe, fail, say } from "./status.js";

export function checkConfirms() {
  const mid = memoryId();
  $("clear-go").disabled = !(mid && $("clear-confirm").value === mid);
  const user = scope().user;
  $("userdel-go").disabled = !(mid && user && $("userdel-confirm").value === user);
}

async function clearMemory() {
  const mid = memoryId();
  if (!mid || $("clear-confirm").value !== mid) { checkConfirms(); return; }
  $("clear-go").disabled = true;
  say(`Clearing ${mid}…`, "busy");
  try {
    const data = await call("v3/chat-memory/clear", { memory_ids: [mid], targets: [named()] }, { scoped: false });
    const item = (data.items || [])[0] || {};
    const text = item.cleared
      ? `Cleared ${mid}: ${item.l0_deleted} L0 messages, ${item.l1_deleted} L1 records, ${item.l2_deleted} L2 files and ${item.l3_deleted} persona deleted.`
      : `Not cleared: ${item.reason || "unknown reason"}${item.retryable ? " (try again)" : ""}.`;
    $("clear-result").textContent = text;
    $("clear-confirm").value = "";
    await refreshCounts();
    say(text, item.cleared ? "ok" : "error");
    $("clear-result").focus();
  } catch (error) {
    $("clear-result").textContent = describe(error);
    fail(error);
  } finally {
    checkConfirms();
  }
}

async function deleteUserMemory() {
  const mid = memoryId();
  const user = scope().user;
  if (!mid || !user || $("userdel-confirm").value !== user) { checkConfirms(); return; }
  $("userdel-go").disabled = true;
  say(`Deleting the memory of user ${user}…`, "busy");
  try {
    const data = await call("v3/user-memory/delete", { ...named(), user_id: user }, { scoped: false });
    const text = `Deleted user ${user}'s memory in ${mid}: ${data.l0_deleted} L0 messages and ${data.l1_deleted} L1 records.`;
    $("userdel-result").textContent = text;
    $("userdel-confirm").value = "";
    await refreshCounts();
    say(text, "ok");
    $("userdel-result").focus();
  } catch (error) {
    $("userdel-result").textContent = describe(error);
    fail(error);
  } finally {
    checkConfirms();
  }
}

$("clear-confirm").addEventListener("input", checkConfirms);
$("userdel-confirm").addEventListener("input", checkConfirms);
$("clear-form").addEventListener("submit", (event) => { event.preventDefault(); clearMemory(); });
$("userdel-form").addEventListener("submit", (event) => { event.preventDefault(); deleteUserMemory(); });

// ------------------------------------------------------------------ export
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function exportMemory() {
  const mid = memoryId();
  if (!mid) { say("Error: set team and agent id first (Key and scope).", "error"); return; }
  const who = $("export-who").value;
  const body = named();
  if (who !== "memory") {
    if (!scope().user) { say("Error: set the user id first (Key and scope).", "error"); return; }
    Object.assign(body, { user_id: scope().user, shared: who === "user-shared" });
  }
  $("export").disabled = true;
  $("export-link").hidden = true;
  say(`Exporting ${mid}…`, "busy");
  try {
    let data = await call("v3/memory/export", body, { scoped: false });
    for (let waited = 0; ["queued", "running", "created"].includes(data.state) && waited < 900; waited += 2) {
      $("export-result").textContent = `Export ${data.export_id}: ${data.state}…`;
      await sleep(2000);
      data = await call("v3/memory/export/status", { export_id: data.export_id }, { scoped: false });
    }
    if (data.state !== "done") throw new ApiError("export", data.error || `the export ended ${data.state}`);
    const c = data.counts || {};
    const text = `Exported ${mid}: ${c.l0} L0 messages, ${c.l1} L1 records, ${c.l2} L2 files, ${c.l3} persona (${data.bytes} bytes). The link is valid until ${data.expires_at}.`;
    $("export-result").textContent = text;
    const link = $("export-link");
    link.href = data.url;
    link.setAttribute("download", `${mid}.tar.gz`);
    link.hidden = false;
    say(text, "ok");
    $("export-result").focus();
  } catch (error) {
    $("export-result").textContent = describe(error);
    fail(error);
  } finally {
    $("export").disabled = false;
  }
}

$("export-form").addEventListener("submit", (event) => { event.preventDefault(); exportMemory(); });
