// The status line (an aria-live region), said inside the record dialog too while it is open.
import { ApiError } from "./api.js";
import { $ } from "./dom.js";

export function say(text, kind = "info") {
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

export function describe(error) {
  if (error instanceof ApiError) {
    const rid = error.requestId ? ` (request ${error.requestId})` : "";
    return `Error ${error.code}: ${error.message}${rid}`;
  }
  return `Error: ${error && error.message ? error.message : String(error)}`;
}

export function fail(error) {
  say(describe(error), "error");
}
