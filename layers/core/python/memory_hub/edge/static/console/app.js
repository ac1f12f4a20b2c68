// Memory Hub console: plain JavaScript, no build step, nothing from another host.
// The API key lives only in this tab's sessionStorage (never in a URL or a cookie); every call is a
// POST with a JSON body to a URL relative to this page, so the console works at /console locally and
// behind a stage prefix (…/v1/console) on AWS.
"use strict";

(() => {
  // ------------------------------------------------------------------ CSP watch (read by the tests)
  const violations = [];
  document.addEventListener("securitypolicyviolation", (event) => {
    violations.push({ directive: event.violatedDirective, blocked: event.blockedURI, sample: event.sample });
  });
  window.memoryConsole = {
    get cspViolations() { return violations.length; },
    get violations() { return violations.slice(); },
  };

  const KEY_ITEM = "memoryHub.console.key";
  const SCOPE_ITEM = "memoryHub.console.scope";
  const $ = (id) => document.getElementById(id);

  // ------------------------------------------------------------------ small DOM helpers
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (name === "class") node.className = value;
      else if (name === "text") node.textContent = value;
      else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
      else node.setAttribute(name, value === true ? "" : String(value));
    }
    for (const child of children) {
      if (child === undefined || child === null) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function cell(content, cls) {
    return el("td", { class: cls }, content);
  }

  function preview(text, max = 160) {
    if (text === null || text === undefined) return "";
    const chars = Array.from(String(text));
    const cut = chars.length > max ? chars.slice(0, max).join("") + "…" : chars.join("");
    return cut.replace(/\r?\n/g, " ↵ ").replace(/\t/g, " → ");
  }

  // ------------------------------------------------------------------ status (aria-live region)
  function say(text, kind = "info") {
    const box = $("status");
    box.className = "status " + kind;
    box.textContent = text;
    // A modal dialog makes the page behind it inert: say it inside the dialog as well.
    const inDialog = $("record-status");
    if ($("record-dialog").open) {
      inDialog.className = "status " + kind;
      inDialog.textContent = text;
    }
  }

  function describe(error) {
    if (error instanceof ApiError) {
      const rid = error.requestId ? ` (request ${error.requestId})` : "";
      return `Error ${error.code}: ${error.message}${rid}`;
    }
    return `Error: ${error && error.message ? error.message : String(error)}`;
  }

  function fail(error) {
    say(describe(error), "error");
  }

  // ------------------------------------------------------------------ key and scope
  function storedKey() {
    try { return sessionStorage.getItem(KEY_ITEM) || ""; } catch (_) { return ""; }
  }

  function showKeyState() {
    $("key-state").textContent = storedKey()
      ? "A key is set for this tab (kept in session storage only; closing the tab forgets it)."
      : "No key set for this tab.";
  }

  function scope() {
    return {
      service: $("service").value.trim() || "default",
      team: $("team").value.trim(),
      agent: $("agent").value.trim(),
      user: $("user").value, // user ids may hold spaces: sent exactly as typed
    };
  }

  function memoryId(s = scope()) {
    return s.team && s.agent ? `chat_memory-${s.team}-${s.agent}` : "";
  }

  // The memory of the scope's pair, named with the pair itself: another pair may spell the same
  // memory_id (team "a-b" + agent "c", team "a" + agent "b-c"), and the id alone is then ambiguous.
  function named(s = scope()) {
    return { memory_id: memoryId(s), team_id: s.team, agent_id: s.agent };
  }

  function showScope() {
    const s = scope();
    const mid = memoryId(s);
    $("memory-id").textContent = mid || "— (set team and agent)";
    $("clear-target").textContent = mid || "—";
    $("userdel-memory").textContent = mid || "—";
    $("export-target").textContent = mid || "—";
    $("userdel-user").textContent = s.user || "—";
    if (!$("audit-memory").dataset.touched) $("audit-memory").value = mid;
    checkConfirms();
  }

  function saveScope() {
    const s = scope();
    try { sessionStorage.setItem(SCOPE_ITEM, JSON.stringify(s)); } catch (_) { /* storage off */ }
  }

  function loadScope() {
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

  // ------------------------------------------------------------------ API calls
  class ApiError extends Error {
    constructor(code, message, data, requestId) {
      super(message);
      this.code = code;
      this.data = data;
      this.requestId = requestId;
    }
  }

  function requireScope(s) {
    const missing = ["team", "agent", "user"].filter((name) => !s[name]);
    if (missing.length) throw new ApiError("setup", `set ${missing.join(", ")} id first (Key and scope)`);
  }

  // route like "v3/atomic/query"; scoped calls carry team_id/agent_id/user_id.
  async function call(route, body = {}, { scoped = true } = {}) {
    const key = storedKey();
    if (!key) throw new ApiError("setup", "paste an API key first (Key and scope)");
    const s = scope();
    const payload = { ...body };
    if (scoped) {
      requireScope(s);
      Object.assign(payload, { team_id: s.team, agent_id: s.agent, user_id: s.user });
    }
    const url = new URL(route, document.baseURI);
    let response;
    try {
      response = await fetch(url, {
        method: "POST",
        headers: {
          "Content-Type": "application/json",
          "Authorization": `Bearer ${key}`,
          "x-tdai-service-id": s.service,
        },
        body: JSON.stringify(payload),
        credentials: "omit",
        cache: "no-store",
        referrerPolicy: "no-referrer",
      });
    } catch (error) {
      throw new ApiError("network", `the request failed (${error.message})`);
    }
    let envelope = null;
    try { envelope = await response.json(); } catch (_) { envelope = null; }
    if (!envelope || typeof envelope !== "object") {
      throw new ApiError(response.status, `unexpected answer (HTTP ${response.status})`);
    }
    if (envelope.code !== 0 || !response.ok) {
      throw new ApiError(envelope.code ?? response.status, envelope.message || `HTTP ${response.status}`,
        envelope.data, envelope.request_id);
    }
    return envelope.data || {};
  }

  // ------------------------------------------------------------------ exact content, whitespace visible
  function marker(text, title) {
    return el("span", { class: "ws", title, "aria-label": title }, text);
  }

  const INVISIBLE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u00ad\u180e\u200b-\u200f\u2028-\u202f\u205f-\u2064\ufeff]/u;

  function renderExact(target, text) {
    target.textContent = "";
    if (text === null || text === undefined) {
      target.append(el("span", { class: "empty" }, "(none)"));
      return;
    }
    if (text === "") {
      target.append(el("span", { class: "empty" }, "(empty string)"));
      return;
    }
    const lines = String(text).split("\n");
    lines.forEach((line, index) => {
      const chars = Array.from(line);
      let lead = 0;
      while (lead < chars.length && chars[lead] === " ") lead += 1;
      let trail = chars.length;
      while (trail > lead && chars[trail - 1] === " ") trail -= 1;
      let plain = "";
      const flush = () => { if (plain) { target.append(plain); plain = ""; } };
      chars.forEach((ch, i) => {
        const inRun = ch === " " && ((i > 0 && chars[i - 1] === " ") || (i + 1 < chars.length && chars[i + 1] === " "));
        if (ch === " " && (i < lead || i >= trail || inRun)) { flush(); target.append(marker("␣", "space")); }
        else if (ch === "\t") { flush(); target.append(marker("→", "tab")); }
        else if (ch === "\r") { flush(); target.append(marker("⟨CR⟩", "carriage return")); }
        else if (ch === "\u00a0") { flush(); target.append(marker("⍽", "no-break space")); }
        else if (INVISIBLE.test(ch)) {
          flush();
          const hex = ch.codePointAt(0).toString(16).toUpperCase().padStart(4, "0");
          target.append(marker(`⟨U+${hex}⟩`, `invisible character U+${hex}`));
        } else plain += ch;
      });
      flush();
      if (index < lines.length - 1) {
        target.append(marker("↵", "newline"));
        target.append("\n");
      }
    });
  }

  // ------------------------------------------------------------------ tabs
  const loaders = {};
  const tabs = Array.from(document.querySelectorAll('[role="tab"]'));

  function selectTab(tab, focus = false) {
    for (const other of tabs) {
      const selected = other === tab;
      other.setAttribute("aria-selected", String(selected));
      other.tabIndex = selected ? 0 : -1;
      $(other.getAttribute("aria-controls")).hidden = !selected;
    }
    if (focus) tab.focus();
    const load = loaders[tab.id];
    if (load && storedKey() && scopeReady()) load();
  }

  function scopeReady() {
    const s = scope();
    return Boolean(s.team && s.agent && s.user);
  }

  function currentTab() {
    return tabs.find((tab) => tab.getAttribute("aria-selected") === "true") || tabs[0];
  }

  tabs.forEach((tab, index) => {
    tab.addEventListener("click", () => selectTab(tab));
    tab.addEventListener("keydown", (event) => {
      let next = null;
      if (event.key === "ArrowRight") next = tabs[(index + 1) % tabs.length];
      else if (event.key === "ArrowLeft") next = tabs[(index - 1 + tabs.length) % tabs.length];
      else if (event.key === "Home") next = tabs[0];
      else if (event.key === "End") next = tabs[tabs.length - 1];
      if (next) { event.preventDefault(); selectTab(next, true); }
    });
  });

  // ------------------------------------------------------------------ counts
  async function refreshCounts() {
    const ids = ["count-l0", "count-l1", "count-l2", "count-l3"];
    try {
      const [l0, l1, l2, l3] = await Promise.all([
        call("v3/conversation/count"), call("v3/atomic/count"), call("v3/scenario/count"), call("v3/core/count"),
      ]);
      [l0.total, l1.total, l2.total, l3.total].forEach((value, i) => { $(ids[i]).textContent = String(value ?? 0); });
      return true;
    } catch (error) {
      ids.forEach((id) => { $(id).textContent = "—"; });
      fail(error);
      return false;
    }
  }

  // ------------------------------------------------------------------ L0 conversations
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
  loaders["tab-l0"] = () => loadL0(0);

  // ------------------------------------------------------------------ L1 records
  const l1 = { offset: 0, total: 0 };

  function tagList(tags) {
    const span = el("span");
    for (const tag of tags || []) span.append(el("span", { class: "tag" }, tag));
    return span;
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
  loaders["tab-l1"] = () => loadL1(0);

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

  // ------------------------------------------------------------------ record dialog (L0 or L1)
  const dialog = $("record-dialog");
  let current = null; // {layer, item, opener}

  function fieldRows(layer, item) {
    const rows = [["id", item.id]];
    if (layer === "l1") {
      rows.push(["version", item.version], ["type", item.type], ["tags", (item.tags || []).join(", ") || "—"],
        ["background", item.background || "—"], ["reinforced", item.reinforced_count],
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
      list.append(el("dt", {}, name), el("dd", { "data-field": name }, value === undefined || value === null ? "—" : String(value)));
    }
    renderExact($("record-visible"), item.content);
    $("record-json").textContent = JSON.stringify(item.content ?? null);
    $("record-delete").textContent = layer === "l1"
      ? `Delete this record (version ${item.version})…` : "Delete this message…";
  }

  function openRecord(layer, item, opener) {
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

  async function refreshAfterChange() {
    const tab = currentTab().id;
    if (tab === "tab-l0") await loadL0();
    else if (tab === "tab-l1") await loadL1();
    else if (tab === "tab-search") await runSearch();
    await refreshCounts();
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
      await refreshAfterChange();
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

  // ------------------------------------------------------------------ L2 files
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
  loaders["tab-l2"] = () => listL2(false);

  // ------------------------------------------------------------------ L3 persona
  async function readPersona() {
    say("Reading persona…", "busy");
    try {
      const data = await call("v3/core/read");
      $("l3-meta").textContent = data.version
        ? `Version ${data.version} · created ${data.created_at} · updated ${data.updated_at} · ${Array.from(data.content || "").length} characters`
        : "No persona yet.";
      renderExact($("l3-visible"), data.content);
      say(data.version ? `Persona at version ${data.version}.` : "No persona yet.", "ok");
    } catch (error) {
      fail(error);
    }
  }

  $("l3-reload").addEventListener("click", readPersona);
  loaders["tab-l3"] = readPersona;

  // ------------------------------------------------------------------ search
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

  // ------------------------------------------------------------------ audit
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
  loaders["tab-audit"] = () => readAudit(false);

  // ------------------------------------------------------------------ erase: clear, user-memory delete
  function checkConfirms() {
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

  // ------------------------------------------------------------------ setup
  async function applySetup() {
    const pasted = $("key").value.trim();
    if (pasted) {
      try { sessionStorage.setItem(KEY_ITEM, pasted); } catch (_) {
        say("Error: this browser does not allow session storage; the console cannot keep the key.", "error");
        return;
      }
    }
    $("key").value = ""; // the key is kept in session storage only, not in the page
    showKeyState();
    saveScope();
    showScope();
    if (!storedKey()) { say("Error: paste an API key first.", "error"); $("key").focus(); return; }
    if (!scopeReady()) { say("Error: set team, agent and user id.", "error"); return; }
    say("Checking the key…", "busy");
    if (await refreshCounts()) {
      const load = loaders[currentTab().id];
      if (load) await load();
      const box = $("status");
      if (!box.classList.contains("error")) say(`Ready: ${memoryId()}, user ${scope().user}. ${box.textContent}`, "ok");
    }
  }

  $("setup-form").addEventListener("submit", (event) => { event.preventDefault(); applySetup(); });
  $("forget-key").addEventListener("click", () => {
    try { sessionStorage.removeItem(KEY_ITEM); } catch (_) { /* nothing stored */ }
    $("key").value = "";
    showKeyState();
    say("The key is forgotten for this tab.", "ok");
  });
  for (const id of ["team", "agent", "user", "service"]) $(id).addEventListener("input", showScope);
  $("counts-refresh").addEventListener("click", refreshCounts);

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
          asset.name ? `${asset.memory_id} (${asset.name})` : asset.memory_id)));
      pick.disabled = found.length === 0;
      say(`${found.length} memories listed${team ? ` for team ${team}` : ""}${next ? " (first 1000)" : ""}.`, "ok");
      if (found.length) pick.focus();
    } catch (error) {
      fail(error);
    }
  }

  $("memory-list").addEventListener("click", listMemories);
  $("memory-pick").addEventListener("change", () => {
    const option = $("memory-pick").selectedOptions[0];
    if (!option || !option.value) return;
    $("team").value = option.dataset.team;
    $("agent").value = option.dataset.agent;
    showScope();
    say(`Picked ${option.value}; set the user id, then use this key and scope.`, "info");
  });

  loadScope();
  showKeyState();
  showScope();
  if (storedKey() && scopeReady()) applySetup();
  else say("Paste an API key and set team, agent and user to start.", "info");
})();
