// The model picker: typing in the model field filters the presets by name, hub id, family and size, each
// entry saying what pycore says of it (report.model_choices, written into the page by build.py: parameters,
// context length, dense / MoE / hybrid / VL), with the last few config.json imports first (kept in this
// browser's localStorage, worded by pycore's web.import_config). An ARIA 1.2 combobox: arrow keys move, Enter
// picks, Escape closes; a pick sets the model field alone (an import's its model inputs), nothing else.
// Everything is written with textContent: names from storage or the catalog are never HTML.
import { MODELS, editDone, el, fillForm, form, formQuery, settleModel, update } from "./app.js";

const input = document.getElementById("f-model");
const list = document.getElementById("model-picker");
const STORE = "gpu-memory-estimator.recent-imports";
const RECENT_MAX = 5;
const SHOWN_MAX = 40;
let shown = [];          // the entries listed: {kind: "preset" | "recent", entry}
let active = -1;         // the highlighted entry's index, -1 for none
let typed = false;       // whether the field was typed in since it was focused (else the list shows everything)

/** The recent imports, newest first: [{label, what, detail, query: [[key, value], ...]}], checked, since
 * storage is anyone's to write. */
export function recentImports() {
  let stored;
  try {
    stored = JSON.parse(localStorage.getItem(STORE) || "[]");
  } catch {
    return [];
  }
  if (!Array.isArray(stored)) return [];
  const text = (value, most = 200) => typeof value === "string" && value.length <= most;
  // config= carries an imported config.json's text (pycore's schema reads up to 20,000 characters of it)
  const pairOk = (pair) => Array.isArray(pair) && pair.length === 2 && text(pair[0]) && text(pair[1], pair[0] === "config" ? 20000 : 200);
  return stored.filter((item) => item && text(item.label) && text(item.what) && text(item.detail) &&
    Array.isArray(item.query) && item.query.every(pairOk))
    .slice(0, RECENT_MAX);
}

/** Keeps an import (web.import_config's choice and query) at the top of the recent imports. */
export function rememberImport(choice, query) {
  if (!choice || !Array.isArray(query)) return;
  const item = { label: choice.label, what: choice.what, detail: choice.detail, query };
  const others = recentImports().filter((old) => old.label !== item.label);
  try {
    localStorage.setItem(STORE, JSON.stringify([item, ...others].slice(0, RECENT_MAX)));
  } catch {
    // Storage refused (private browsing, full): the import still happened, it is only not remembered.
  }
}

/** The entries matching what is typed: every word somewhere in an entry's words; names that start with the
 * text first; recent imports before presets. */
function matches() {
  const text = typed ? input.value.trim().toLowerCase() : "";
  const words = text.split(/\s+/).filter(Boolean);
  const fits = (haystack) => words.every((word) => haystack.includes(word));
  const recent = recentImports().filter((item) => fits(`${item.label} ${item.what} ${item.query.filter((p) => p[0] !== "config").map((p) => p[1]).join(" ")}`.toLowerCase()))
    .map((entry) => ({ kind: "recent", entry }));
  const presets = MODELS.filter((model) => fits(model.words));
  const starts = (model) => [model.id, ...model.hub, ...model.aliases].some((name) => name.toLowerCase().startsWith(text));
  const ordered = text ? [...presets.filter(starts), ...presets.filter((model) => !starts(model))] : presets;
  return [...recent, ...ordered.map((entry) => ({ kind: "preset", entry }))].slice(0, SHOWN_MAX);
}

function option(item, i) {
  const { kind, entry } = item;
  const node = el("li", undefined, kind === "recent" ? "pick recent" : "pick");
  node.id = `model-option-${i}`;
  node.setAttribute("role", "option");
  node.setAttribute("aria-selected", "false");
  const name = el("span", kind === "recent" ? entry.label : entry.id, "pick-name");
  const what = el("span", entry.what, "pick-what");
  const hub = kind === "preset" && entry.hub.length ? ` · ${entry.hub.join(", ")}` : "";
  node.append(name, " ", what, el("span", `${entry.detail}${hub}`, "pick-detail"));
  node.addEventListener("mousedown", (event) => event.preventDefault());    // the field keeps the focus
  node.addEventListener("click", () => pick(i));
  return node;
}

function open() {
  shown = matches();
  active = -1;
  list.replaceChildren(...(shown.length ? shown.map(option) : [el("li", "No preset matches; a hub id (owner/name) can be fetched.", "pick-none")]));
  list.hidden = false;
  input.setAttribute("aria-expanded", "true");
  input.removeAttribute("aria-activedescendant");
}

function close() {
  if (list.hidden) return;
  list.hidden = true;
  input.setAttribute("aria-expanded", "false");
  input.removeAttribute("aria-activedescendant");
  active = -1;
}

function highlight(index) {
  if (!shown.length) return;
  active = (index + shown.length) % shown.length;
  [...list.children].forEach((node, i) => node.setAttribute("aria-selected", String(i === active)));
  const node = list.children[active];
  input.setAttribute("aria-activedescendant", node.id);
  node.scrollIntoView({ block: "nearest" });
}

/** Sets the model from an entry: a preset's id in the model field; a recent import's inputs in place of the
 * model inputs, as the import itself set them. Every other input stays. */
function pick(index) {
  const item = shown[index];
  if (!item) return;
  close();
  if (item.kind === "preset") {
    input.value = item.entry.id;
    settleModel(true);
  } else {
    const params = new URLSearchParams(formQuery());
    for (const field of form.querySelectorAll('fieldset[data-group="model"] [data-key]')) params.delete(field.dataset.key);
    for (const [key, value] of item.entry.query) params.set(key, value);
    fillForm(params.toString());
  }
  typed = false;
  update("push");
  editDone();
  input.focus();
}

list.addEventListener("mousedown", (event) => event.preventDefault());     // its scrollbar too keeps the focus
input.addEventListener("input", () => {
  typed = true;
  open();
});
input.addEventListener("focus", () => { typed = false; });
input.addEventListener("click", () => (list.hidden ? open() : close()));
input.addEventListener("blur", close);
input.addEventListener("keydown", (event) => {
  if (event.key === "ArrowDown" || event.key === "ArrowUp") {
    event.preventDefault();
    if (list.hidden) open();
    highlight(active < 0 && event.key === "ArrowUp" ? -1 : active + (event.key === "ArrowDown" ? 1 : -1));
  } else if (event.key === "Enter" && !list.hidden && active >= 0) {
    event.preventDefault();
    pick(active);
  } else if (event.key === "Enter") {
    close();
  } else if (event.key === "Escape" && !list.hidden) {
    event.preventDefault();
    close();
  } else if (event.key === "Tab") {
    close();
  }
});
