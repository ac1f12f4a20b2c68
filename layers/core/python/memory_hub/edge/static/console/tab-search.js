// Search L1 records or L0 messages by words, best first.
import { call } from "./api.js";
import { $, cell, el, preview } from "./dom.js";
import { openRecord } from "./record.js";
import { fail, say } from "./status.js";
import { onTab } from "./tabs.js";

async function runSearch() {
  const query = $("search-query").value;
  if (!query.trim()) { say("Error: type words to search for.", "error"); return; }
  const layer = $("search-layer").value;
  const limit = Number($("search-limit").value);
  say("Searching…", "busy");
  try {
    const route = layer === "l1" ? "v3/atomic/search" : "v3/conversation/search";
    const data = await call(route, { query, limit });
    const found = layer === "l1" ? data.items || [] : data.messages || [];
    const rows = found.map((item) => el("tr", { "data-id": item.id },
      cell(typeof item.score === "number" ? item.score.toFixed(4) : String(item.score ?? ""), "nowrap"),
      cell(layer === "l1" ? `${item.type} · v${item.version}` : `${item.role} · session ${item.session_id}`),
      cell(preview(item.content), "preview"),
      cell(el("button", {
        type: "button", class: "secondary open-record", "aria-label": `Open ${layer === "l1" ? "record" : "message"} ${item.id}`,
        onclick: (event) => openRecord(layer, item, event.currentTarget),
      }, "Open")),
    ));
    $("search-table").tBodies[0].replaceChildren(...rows);
    $("search-summary").textContent = `${rows.length} ${layer === "l1" ? "records" : "messages"} found, best first.`;
    say(`${rows.length} results for “${query}”.`, "ok");
  } catch (error) {
    fail(error);
  }
}

$("search-form").addEventListener("submit", (event) => { event.preventDefault(); runSearch(); });
onTab("tab-search", { refresh: runSearch });
