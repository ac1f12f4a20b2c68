// L0 conversations: the newest messages first, by session, a page at a time.
import { call } from "./api.js";
import { $, cell, el, preview } from "./dom.js";
import { openRecord } from "./record.js";
import { fail, say } from "./status.js";
import { onTab } from "./tabs.js";

const l0 = { offset: 0, total: 0 };

async function loadL0(offset = l0.offset) {
  const limit = Number($("l0-limit").value);
  const session = $("l0-session").value;
  const body = { limit, offset };
  if (session.trim()) body.session_id = session;
  say("Loading messages…", "busy");
  try {
    const data = await call("v3/conversation/query", body);
    l0.offset = offset;
    l0.total = data.total || 0;
    const rows = (data.messages || []).map((message) => el("tr", { "data-id": message.id },
      cell(message.timestamp, "nowrap"),
      cell(el("button", {
        type: "button", class: "link session-filter", "data-session": message.session_id,
        "aria-label": `Show only session ${message.session_id}`,
        onclick: () => { $("l0-session").value = message.session_id; loadL0(0); },
      }, message.session_id)),
      cell(message.role),
      cell(preview(message.content), "preview"),
      cell(el("button", {
        type: "button", class: "secondary open-record", "aria-label": `Open message ${message.id}`,
        onclick: (event) => openRecord("l0", message, event.currentTarget),
      }, "Open")),
    ));
    $("l0-table").tBodies[0].replaceChildren(...rows);
    const first = rows.length ? offset + 1 : 0;
    const scopeText = body.session_id !== undefined ? `session ${body.session_id}` : "all sessions";
    $("l0-summary").textContent = rows.length
      ? `Messages ${first}–${offset + rows.length} of ${l0.total} (${scopeText}), newest first.`
      : `No messages here (${l0.total} in ${scopeText}).`;
    $("l0-prev").disabled = offset <= 0;
    $("l0-next").disabled = offset + limit >= l0.total;
    say(`Showing ${rows.length} of ${l0.total} messages (${scopeText}).`, "ok");
  } catch (error) {
    fail(error);
  }
}

$("l0-form").addEventListener("submit", (event) => { event.preventDefault(); loadL0(0); });
$("l0-all").addEventListener("click", () => { $("l0-session").value = ""; loadL0(0); });
$("l0-prev").addEventListener("click", () => loadL0(Math.max(0, l0.offset - Number($("l0-limit").value))));
$("l0-next").addEventListener("click", () => loadL0(l0.offset + Number($("l0-limit").value)));
onTab("tab-l0", { load: () => loadL0(0), refresh: () => loadL0() });
