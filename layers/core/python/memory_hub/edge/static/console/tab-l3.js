// L3 persona: its exact content, whitespace visible.
import { call } from "./api.js";
import { $, renderExact } from "./dom.js";
import { fail, say } from "./status.js";
import { onTab } from "./tabs.js";

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
onTab("tab-l3", { load: readPersona });
