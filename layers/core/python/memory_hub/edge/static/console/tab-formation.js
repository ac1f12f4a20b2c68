// Formation: where the forming of this user's memory from their conversation stands
// (formation/status), and "Form now" (formation/run, optionally a backfill). Formation off — for the
// deployment or for the memory — answers the run with 409 "formation: off": said as such, plainly.
import { ApiError, call } from "./api.js";
import { $, el } from "./dom.js";
import { describe, fail, say } from "./status.js";
import { onTab } from "./tabs.js";

const POLL_MS = 2000;
const POLLS = 45; // how long "Form now" follows a run: 90 s, then "Read status" reads it again
let following = 0; // the run being followed (a newer one, a read, or leaving the tab stops it)

function sessionBody() {
  const session = $("formation-session").value;
  return session.trim() ? { session_id: session } : {};
}

// The memory's setting and whether the service forms anything with it.
function setting(data) {
  if (data.enabled) return `on: ${data.layers === "all" ? "records, scenes and persona" : "records"}`;
  if (data.layers === "off") return "off for this memory";
  return `off: this deployment forms nothing (the memory's setting: ${data.layers})`;
}

function rows(data) {
  const error = data.last_error;
  const session = sessionBody().session_id;
  return [
    ["formation", setting(data)],
    ["model", data.model || "—"],
    ["state", data.state],
    ["pending", `${data.pending_messages} message${data.pending_messages === 1 ? "" : "s"} not formed yet${session ? ` in session ${session}` : ""}`],
    ["last run", data.last_run_at || "never"],
    ["last formed", data.last_formed_message_id || "—"],
    ["records formed", data.records_formed],
    ["dropped", `${data.dropped} entr${data.dropped === 1 ? "y" : "ies"} of the model refused`],
    ["last error", error ? `${error.at} · ${error.kind}: ${error.message}` : "none"],
  ];
}

function showStatus(data) {
  $("formation-fields").replaceChildren(...rows(data).flatMap(([name, value]) => [
    el("dt", {}, name), el("dd", { "data-field": name }, String(value)),
  ]));
  showSetting(data);
}

// The memory's formation setting in the Key and scope card (the asset's `formation`).
function showSetting(data) {
  $("memory-formation").textContent = data ? `${data.layers}${data.enabled ? "" : " (not forming)"}` : "—";
}

async function readStatus() {
  return call("v3/formation/status", sessionBody());
}

export async function readFormation() {
  following += 1;
  say("Reading formation status…", "busy");
  try {
    const data = await readStatus();
    showStatus(data);
    say(`Formation ${data.state}: ${data.pending_messages} messages pending, ${data.records_formed} records formed.`, "ok");
  } catch (error) {
    fail(error);
  }
}

// The scope card's line, read when a key and scope are set (a reader key may read it).
export async function refreshFormationSetting() {
  try {
    showSetting(await call("v3/formation/status"));
  } catch (_) {
    showSetting(null); // the counts beside it already said what went wrong
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function follow(run) {
  for (let poll = 0; poll < POLLS && following === run; poll += 1) {
    await sleep(POLL_MS);
    if (following !== run || $("panel-formation").hidden) return; // another tab's status is not overwritten
    const data = await readStatus();
    showStatus(data);
    if (data.state === "paused") {
      say(`Formation paused after failing: ${data.last_error ? data.last_error.message : "see the last error"}.`, "error");
      return;
    }
    if (data.state === "idle") {
      say(`Formation done: ${data.records_formed} records formed, ${data.pending_messages} messages pending.`, "ok");
      return;
    }
  }
}

async function formNow() {
  const backfill = $("formation-backfill").checked;
  const body = { ...sessionBody(), ...(backfill ? { backfill: true } : {}) };
  $("formation-run").disabled = true;
  following += 1;
  const run = following;
  say("Asking for a formation run…", "busy");
  try {
    const data = await call("v3/formation/run", body);
    const text = data.state === "idle" && data.pending_messages === 0
      ? `Nothing to form: no messages pending${backfill ? "" : " (a backfill also takes messages never queued)"}.`
      : `Formation ${data.state}: ${data.pending_messages} messages to form.`;
    $("formation-result").textContent = text;
    say(text, "ok");
    await follow(run);
  } catch (error) {
    if (error instanceof ApiError && error.code === 409 && String(error.message).startsWith("formation: off")) {
      const text = "Formation is off for this memory or this deployment: nothing was run.";
      $("formation-result").textContent = `${text} (${describe(error)})`;
      say(text, "error");
    } else {
      $("formation-result").textContent = describe(error);
      fail(error);
    }
  } finally {
    $("formation-run").disabled = false;
  }
}

$("formation-form").addEventListener("submit", (event) => { event.preventDefault(); readFormation(); });
$("formation-run").addEventListener("click", formNow);
onTab("tab-formation", { load: readFormation, refresh: readFormation });
