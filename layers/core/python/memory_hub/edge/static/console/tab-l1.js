// L1 records: the most recently updated first, by type, a page at a time.
import { call } from "./api.js";
import { $, cell, el, preview } from "./dom.js";
import { openRecord } from "./record.js";
import { fail, say } from "./status.js";
import { onTab } from "./tabs.js";

const l1 = { offset: 0, total: 0 };

function tagList(tags) {
  const span = el("span");
  for (const tag of tags || []) span.append(el("span", { class: "tag" }, tag));
  return span;
}

// Where a record came from: how many messages it cites (the record dialog lists and shows them) and
// whether formation wrote it.
function provenance(item) {
  const count = (item.source_message_ids || []).length;
  return el("span", { class: "provenance" },
    item.formed ? el("span", { class: "tag formed" }, "formed") : null,
    count ? `${count} message${count === 1 ? "" : "s"}` : "—");
}

async function loadL1(offset = l1.offset) {
  const limit = Number($("l1-limit").value);
  const type = $("l1-type").value.trim();
  const body = { limit, offset };
  if (type) body.type = type;
  say("Loading records…", "busy");
  try {
    const data = await call("v3/atomic/query", body);
    l1.offset = offset;
    l1.total = data.total || 0;
    const rows = (data.items || []).map((item) => el("tr", { "data-id": item.id },
      cell(item.updated_at, "nowrap"),
      cell(item.type),
      cell(String(item.version), "version"),
      cell(tagList(item.tags)),
      cell(provenance(item), "nowrap"),
      cell(preview(item.content), "preview"),
      cell(el("button", {
        type: "button", class: "secondary open-record", "aria-label": `Open record ${item.id}`,
        onclick: (event) => openRecord("l1", item, event.currentTarget),
      }, "Open")),
    ));
    $("l1-table").tBodies[0].replaceChildren(...rows);
    const first = rows.length ? offset + 1 : 0;
    $("l1-summary").textContent = rows.length
      ? `Records ${first}–${offset + rows.length} of ${l1.total}${type ? ` (type ${type})` : ""}, most recently updated first.`
      : `No records here (${l1.total}${type ? ` of type ${type}` : ""} in all).`;
    $("l1-prev").disabled = offset <= 0;
    $("l1-next").disabled = offset + limit >= l1.total;
    say(`Showing ${rows.length} of ${l1.total} records.`, "ok");
  } catch (error) {
    fail(error);
  }
}

$("l1-form").addEventListener("submit", (event) => { event.preventDefault(); loadL1(0); });
$("l1-prev").addEventListener("click", () => loadL1(Math.max(0, l1.offset - Number($("l1-limit").value))));
$("l1-next").addEventListener("click", () => loadL1(l1.offset + Number($("l1-limit").value)));
onTab("tab-l1", { load: () => loadL1(0), refresh: () => loadL1() });
