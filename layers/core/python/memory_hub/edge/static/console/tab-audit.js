// The audit trail, newest first, a page at a time.
import { call } from "./api.js";
import { $, cell, el } from "./dom.js";
import { fail, say } from "./status.js";
import { onTab } from "./tabs.js";

const audit = { next: null, filters: null };

async function readAudit(more = false) {
  const body = more && audit.filters ? { ...audit.filters } : { limit: Number($("audit-limit").value) };
  if (!more) {
    const mid = $("audit-memory").value.trim();
    if (mid) body.memory_id = mid;
    if ($("audit-action").value) body.action = $("audit-action").value;
    audit.filters = { ...body };
  } else if (audit.next) {
    body.next_token = audit.next;
  }
  say("Reading audit events…", "busy");
  try {
    const data = await call("v3/audit/query", body, { scoped: false });
    audit.next = data.next_token || null;
    const rows = (data.events || []).map((event) => el("tr", { "data-event": event.event_id },
      cell(event.at, "nowrap"), cell(event.action), cell(event.layer), cell(event.target, "preview"),
      cell(String(event.count ?? "")), cell(event.actor), cell(event.memory_id, "preview"), cell(event.request_id, "nowrap"),
    ));
    const tbody = $("audit-table").tBodies[0];
    if (more) tbody.append(...rows); else tbody.replaceChildren(...rows);
    $("audit-more").hidden = !audit.next;
    $("audit-summary").textContent = `${tbody.rows.length} events shown, newest first${audit.next ? "; more available" : ""}.`;
    say(`Showing ${tbody.rows.length} audit events.`, "ok");
  } catch (error) {
    fail(error);
  }
}

$("audit-form").addEventListener("submit", (event) => { event.preventDefault(); readAudit(false); });
$("audit-more").addEventListener("click", () => readAudit(true));
$("audit-memory").addEventListener("input", () => { $("audit-memory").dataset.touched = "1"; });
onTab("tab-audit", { load: () => readAudit(false) });
