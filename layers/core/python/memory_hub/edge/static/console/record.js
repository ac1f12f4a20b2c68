// The record dialog (an L0 message or an L1 record): exact content, the messages a record was drawn
// from (each shown on a click), and delete that id at that version (a 409 shows the current record
// and asks again).
import { ApiError, call } from "./api.js";
import { refreshCounts } from "./counts.js";
import { $, el, renderExact } from "./dom.js";
import { describe, fail, say } from "./status.js";
import { currentTab, refreshCurrent } from "./tabs.js";

const dialog = $("record-dialog");
let current = null; // {layer, item, opener}

// The current state of one L1 record (there is no get-by-id route: page through the newest first;
// a record that changed has the newest updated_at, so it is usually on the first page).
async function findL1(id) {
  for (let offset = 0; offset <= 10000; offset += 100) {
    const data = await call("v3/atomic/query", { limit: 100, offset });
    const found = (data.items || []).find((item) => item.id === id);
    if (found) return found;
    if (offset + 100 >= (data.total || 0)) return null;
  }
  return null;
}

// A cited message (there is no get-by-id route). The cheapest read that finds it: conversation/query
// narrowed to the record's session, newest first — a formed record takes the session of the batch
// it was formed from, so its sources are there, usually on the first page of 100. Only when that
// misses (a client's record may cite another session's messages, or have none) are all the user's
// sessions paged. A search would need the message's words, which the record does not hold.
async function findMessage(id, sessionId) {
  const narrowings = sessionId ? [{ session_id: sessionId }, {}] : [{}];
  for (const narrowing of narrowings) {
    for (let offset = 0; offset <= 10000; offset += 100) {
      const data = await call("v3/conversation/query", { ...narrowing, limit: 100, offset });
      const found = (data.messages || []).find((message) => message.id === id);
      if (found) return found;
      if (offset + 100 >= (data.total || 0)) break;
    }
  }
  return null;
}

async function showSource(record, id) {
  const box = $("record-source");
  say(`Looking up message ${id}…`, "busy");
  try {
    const message = await findMessage(id, record.session_id);
    if (!current || current.item.id !== record.id) return; // the dialog moved on meanwhile
    box.hidden = false;
    $("record-source-title").textContent = `Source message ${id}`;
    if (!message) {
      $("record-source-fields").replaceChildren();
      renderExact($("record-source-visible"), null);
      say(`Message ${id} was not found among this user's messages.`, "error");
      return;
    }
    $("record-source-fields").replaceChildren(
      ...[["role", message.role], ["session", message.session_id], ["time", message.timestamp]]
        .flatMap(([name, value]) => [el("dt", {}, name), el("dd", { "data-field": name }, value)]));
    renderExact($("record-source-visible"), message.content);
    say(`Showing message ${id}, which record ${record.id} was drawn from.`, "ok");
    box.focus();
  } catch (error) {
    fail(error);
  }
}

function sourceList(item) {
  const ids = item.source_message_ids || [];
  if (!ids.length) return "—";
  return el("span", { class: "sources" }, ...ids.map((id) => el("button", {
    type: "button", class: "link source-message", "data-id": id, "aria-label": `Show message ${id}`,
    onclick: () => showSource(item, id),
  }, id)));
}

function fieldRows(layer, item) {
  const rows = [["id", item.id]];
  if (layer === "l1") {
    rows.push(["version", item.version], ["type", item.type], ["tags", (item.tags || []).join(", ") || "—"],
      ["background", item.background || "—"], ["reinforced", item.reinforced_count],
      ["formed", item.formed ? "yes: formation wrote it" : "no"], ["sources", sourceList(item)],
      ["created", item.created_at], ["updated", item.updated_at]);
    if (item.session_id) rows.push(["session", item.session_id]);
    if (item.metadata && Object.keys(item.metadata).length) rows.push(["metadata", JSON.stringify(item.metadata)]);
  } else {
    rows.push(["session", item.session_id], ["role", item.role], ["time", item.timestamp]);
    if (item.task_id) rows.push(["task", item.task_id]);
  }
  if (item.score !== undefined) rows.push(["score", item.score]);
  const content = item.content === null || item.content === undefined ? "" : String(item.content);
  rows.push(["length", `${Array.from(content).length} characters`]);
  return rows;
}

function showRecord(layer, item) {
  $("record-title").textContent = layer === "l1" ? `L1 record ${item.id}` : `L0 message ${item.id}`;
  const list = $("record-fields");
  list.replaceChildren();
  for (const [name, value] of fieldRows(layer, item)) {
    const shown = value instanceof Node ? value : value === undefined || value === null ? "—" : String(value);
    list.append(el("dt", {}, name), el("dd", { "data-field": name }, shown));
  }
  $("record-source").hidden = true;
  renderExact($("record-visible"), item.content);
  $("record-json").textContent = JSON.stringify(item.content ?? null);
  $("record-delete").textContent = layer === "l1"
    ? `Delete this record (version ${item.version})…` : "Delete this message…";
}

export function openRecord(layer, item, opener) {
  current = { layer, item, opener };
  showRecord(layer, item);
  $("record-conflict").hidden = true;
  $("record-status").textContent = "";
  $("record-status").className = "status";
  $("record-confirm").hidden = true;
  $("record-delete").hidden = false;
  $("record-delete").disabled = false;
  if (!dialog.open) dialog.showModal();
  $("record-visible").focus(); // the dialog's first field: the exact content
}

function askDelete() {
  if (!current) return;
  const { layer, item } = current;
  $("record-confirm-text").textContent = layer === "l1"
    ? `Delete L1 record ${item.id} at version ${item.version}? This cannot be undone.`
    : `Delete L0 message ${item.id}? This cannot be undone.`;
  $("record-confirm-go").textContent = layer === "l1" ? `Delete version ${item.version}` : "Delete message";
  $("record-confirm").hidden = false;
  $("record-delete").hidden = true;
  $("record-confirm-go").focus();
}

function cancelDelete() {
  $("record-confirm").hidden = true;
  $("record-delete").hidden = false;
  $("record-delete").focus();
}

async function confirmDelete() {
  if (!current) return;
  const { layer, item } = current;
  $("record-confirm-go").disabled = true;
  say("Deleting…", "busy");
  try {
    let data;
    if (layer === "l1") {
      data = await call("v3/atomic/delete", { ids: [item.id], expected_versions: { [item.id]: item.version } });
    } else {
      data = await call("v3/conversation/delete", { message_ids: [item.id] });
    }
    const gone = (data.deleted_ids || []).includes(item.id);
    const what = layer === "l1" ? `L1 record ${item.id} (version ${item.version})` : `L0 message ${item.id}`;
    closeRecord();
    await refreshCurrent();
    await refreshCounts();
    say(gone ? `Deleted ${what}.` : `${what} was already gone; nothing deleted.`, "ok");
  } catch (error) {
    if (layer === "l1" && error instanceof ApiError && error.code === 409 && error.data && error.data.conflicts) {
      $("record-confirm-go").disabled = false;
      await showConflict(item, error);
    } else {
      fail(error);
    }
  } finally {
    $("record-confirm-go").disabled = false;
  }
}

async function showConflict(seen, error) {
  if (!current) { fail(error); return; }
  const conflict = error.data.conflicts.find((c) => c.id === seen.id) || error.data.conflicts[0];
  const box = $("record-conflict");
  let fresh = null;
  try { fresh = await findL1(seen.id); } catch (lookup) { fail(lookup); }
  box.hidden = false;
  if (!fresh) {
    box.textContent = `This record changed (you saw version ${conflict.expected}, it is at version ${conflict.actual}) and can no longer be found: nothing was deleted.`;
    $("record-confirm").hidden = true;
    $("record-delete").hidden = true;
    say(`${describe(error)} — the record is no longer there.`, "error");
    box.focus();
    return;
  }
  current.item = fresh;
  showRecord("l1", fresh);
  box.textContent = `This record changed since you opened it: you saw version ${conflict.expected}, it is now at version ${fresh.version}. Nothing was deleted. The current record is shown below — delete version ${fresh.version}?`;
  say(`${describe(error)} — the record is now at version ${fresh.version}; confirm again to delete it.`, "error");
  askDelete();
}

function closeRecord() {
  if (dialog.open) dialog.close();
}

dialog.addEventListener("close", () => {
  const opener = current && current.opener;
  current = null;
  if (opener && opener.isConnected) opener.focus();
  else currentTab().focus(); // the row was removed (deleted): back to the panel's tab
});
$("record-delete").addEventListener("click", askDelete);
$("record-confirm-cancel").addEventListener("click", cancelDelete);
$("record-confirm-go").addEventListener("click", confirmDelete);
$("record-close").addEventListener("click", closeRecord);
