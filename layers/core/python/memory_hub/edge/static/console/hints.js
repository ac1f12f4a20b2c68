// Beside each control marked data-rule="<field>", the API's own words for that field's rules
// (rules.js is rendered by the API from its one set of field rules). They inform; the API decides.
import RULES from "./rules.js";
import { el } from "./dom.js";

export function showHints() {
  for (const control of document.querySelectorAll("[data-rule]")) {
    const rule = RULES.fields[control.dataset.rule];
    if (!rule || !rule.hint) continue;
    const id = `${control.id}-rule`;
    control.after(el("span", { id, class: "hint", "data-rule-hint": control.dataset.rule }, rule.hint));
    const described = control.getAttribute("aria-describedby");
    control.setAttribute("aria-describedby", described ? `${described} ${id}` : id);
  }
}
