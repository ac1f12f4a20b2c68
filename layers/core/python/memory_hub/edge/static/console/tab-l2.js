// L2 files: list, open, and save with expected_version (a 409 keeps the edit and asks again).
import { ApiError, call } from "./api.js";
import { refreshCounts } from "./counts.js";
import { $, cell, el } from "./dom.js";
import { describe, fail, say } from "./status.js";
import { onTab } from "./tabs.js";

const l2 = { next: null, file: null };

async function listL2(more = false) {
  const body = { path_prefix: $("l2-prefix").value, limit: 100 };
  if (more && l2.next) body.next_token = l2.next;
  say("Listing files…", "busy");
  try {
    const data = await call("v3/scenario/ls", body);
    l2.next = data.next_token || null;
    const rows = (data.entries || []).map((entry) => el("tr", { "data-path": entry.path },
      cell(el("button", {
        type: "button", class: "link open-file", "aria-label": `Open file ${entry.path}`,
        onclick: () => { $("l2-path").value = entry.path; openFile(entry.path); },
      }, entry.path)),
      cell(String(entry.version)),
      cell(`${entry.size} B`, "nowrap"),
      cell(entry.summary ?? "—", "preview"),
      cell(entry.updated_at, "nowrap"),
    ));
    const body2 = $("l2-table").tBodies[0];
    if (more) body2.append(...rows); else body2.replaceChildren(...rows);
    $("l2-more").hidden = !l2.next;
    $("l2-summary").textContent = `${body2.rows.length} of ${data.total} files shown.`;
    say(`Listed ${body2.rows.length} of ${data.total} files.`, "ok");
  } catch (error) {
    fail(error);
  }
}

function showFile(file) {
  l2.file = file;
  $("l2-editor").hidden = false;
  $("l2-editor-path").textContent = file.path;
  $("l2-content").value = file.content ?? "";
  $("l2-file-summary").value = file.summary ?? "";
  $("l2-conflict").hidden = true;
  $("l2-editor-meta").textContent = file.version
    ? `Version ${file.version} · created ${file.created_at} · updated ${file.updated_at}`
    : "New file (does not exist yet): saving creates it at version 1.";
  setSaveVersion(file.version || 0);
}

function setSaveVersion(version) {
  l2.expected = version;
  $("l2-save").textContent = version ? `Save (expected version ${version})` : "Create file (must not exist yet)";
}

async function openFile(path) {
  if (!path.trim()) { say("Error: type a file path first.", "error"); return; }
  say("Reading file…", "busy");
  try {
    const data = await call("v3/scenario/read", { path });
    showFile({ ...data, path });
    say(data.version ? `Opened ${path} at version ${data.version}.` : `${path} does not exist yet; saving creates it.`, "ok");
    $("l2-content").focus();
  } catch (error) {
    fail(error);
  }
}

async function saveFile() {
  if (!l2.file) return;
  const body = { path: l2.file.path, content: $("l2-content").value, expected_version: l2.expected };
  const summary = $("l2-file-summary").value;
  if (summary !== (l2.file.summary ?? "")) body.summary = summary;
  $("l2-save").disabled = true;
  say("Saving…", "busy");
  try {
    const data = await call("v3/scenario/write", body);
    const saved = await call("v3/scenario/read", { path: l2.file.path });
    showFile({ ...saved, path: l2.file.path });
    await listL2();
    await refreshCounts();
    say(`Saved ${data.path} as version ${data.version}.`, "ok");
  } catch (error) {
    if (error instanceof ApiError && error.code === 409 && error.data && "current_version" in error.data) {
      const now = error.data.current_version;
      const box = $("l2-conflict");
      box.hidden = false;
      box.textContent = now
        ? `Someone else saved this file: it is now at version ${now} (you edited version ${l2.expected || "— new file"}). Your text is still in the editor. Save again to replace version ${now}, or reload the file to see it (your edits are then lost).`
        : `This file no longer exists (you edited version ${l2.expected}). Save again to create it anew, or close it.`;
      $("l2-editor-meta").textContent = `You are editing version ${l2.expected || "— (new file)"}; the stored file is now at version ${now || "— (gone)"}.`;
      setSaveVersion(now || 0);
      say(`${describe(error)} — the file is now at version ${now}; save again to overwrite it.`, "error");
      box.focus();
    } else {
      fail(error);
    }
  } finally {
    $("l2-save").disabled = false;
  }
}

$("l2-form").addEventListener("submit", (event) => { event.preventDefault(); listL2(false); });
$("l2-more").addEventListener("click", () => listL2(true));
$("l2-open-form").addEventListener("submit", (event) => { event.preventDefault(); openFile($("l2-path").value); });
$("l2-editor").addEventListener("submit", (event) => { event.preventDefault(); saveFile(); });
$("l2-reload").addEventListener("click", () => { if (l2.file) openFile(l2.file.path); });
$("l2-close").addEventListener("click", () => { l2.file = null; $("l2-editor").hidden = true; $("l2-path").focus(); });
onTab("tab-l2", { load: () => listL2(false) });
