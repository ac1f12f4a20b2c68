// Small DOM helpers shared by every module of the console (no HTTP here).

export const $ = (id) => document.getElementById(id);

export function el(tag, attrs, ...children) {
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

export function cell(content, cls) {
  return el("td", { class: cls }, content);
}

export function preview(text, max = 160) {
  if (text === null || text === undefined) return "";
  const chars = Array.from(String(text));
  const cut = chars.length > max ? chars.slice(0, max).join("") + "…" : chars.join("");
  return cut.replace(/\r?\n/g, " ↵ ").replace(/\t/g, " → ");
}

// ------------------------------------------------------------------ exact content, whitespace visible
function marker(text, title) {
  return el("span", { class: "ws", title, "aria-label": title }, text);
}

const INVISIBLE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u00ad\u180e\u200b-\u200f\u2028-\u202f\u205f-\u2064\ufeff]/u;

function renderLine(target, line) {
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
}

export function renderExact(target, text) {
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
    renderLine(target, line);
    if (index < lines.length - 1) {
      target.append(marker("↵", "newline"));
      target.append("\n");
    }
  });
}
