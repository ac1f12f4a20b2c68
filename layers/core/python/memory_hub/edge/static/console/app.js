// Memory Hub console: plain JavaScript modules, no build step, nothing from another host. This is
// the entry module: it watches for Content-Security-Policy violations (read by the tests), loads
// one module per tab (each wires its own controls), shows the field hints and starts.
//
// api.js talks HTTP to the API; session.js keeps the key and scope; dom.js, status.js, tabs.js,
// counts.js, hints.js and record.js are shared; rules.js is rendered by the API.
import { showHints } from "./hints.js";
import { start } from "./setup.js";
import "./tab-l0.js";
import "./tab-l1.js";
import "./tab-l2.js";
import "./tab-l3.js";
import "./tab-search.js";
import "./tab-formation.js"; // setup.js imports it too (the scope card shows the memory's setting)
import "./tab-audit.js";
import "./tab-admin.js"; // setup.js imports it too (the erase forms follow the scope)

const violations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  violations.push({ directive: event.violatedDirective, blocked: event.blockedURI, sample: event.sample });
});

showHints();
start();

window.memoryConsole = {
  get cspViolations() { return violations.length; },
  get violations() { return violations.slice(); },
};
