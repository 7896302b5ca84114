// Launch settings out and back, and calibration from a run (issue 30). pycore makes every block, row and
// message (pycore.output.web: launch, launch_read, calibration); this only moves text between the page and it.
// Pasted text stays in this page: it is handed to Python here and sent nowhere. All of it is shown as textContent.
import { editDone, el, fillForm, formQuery, requestQuery, setInputPairs, update } from "./app.js";

const $ = (id) => document.getElementById(id);
const CONTROLS = ["export-text", "export-apply", "calibrate-text", "calibrate-run", "calibrate-apply"];
let overrides = [];          // the calibration's [key, value] pairs, for Apply

function say(node, text, failed = false) {
  node.textContent = text;
  node.className = failed ? "import-status failed" : "import-status";
}

/** The form's inputs with these [key, value] pairs set, drawn and written to the link (one history entry). */
function setInputs(pairs) {
  const params = new URLSearchParams(formQuery());
  setInputPairs(params, pairs);
  fillForm(params.toString());
  update("push");
  editDone();
}

// --- launch settings of the setup in the form ------------------------------------------------------------------

let drawnFor = null;

function drawBlocks() {
  if (!window.pycoreLaunch || !$("export").open) return;
  const query = requestQuery();
  if (query === drawnFor) return;
  drawnFor = query;
  const payload = JSON.parse(window.pycoreLaunch(query));
  $("export-note").textContent = payload.note;
  $("export-note").hidden = !payload.note;
  $("export-blocks").replaceChildren(...payload.blocks.map(block));
}

function block(item) {
  const box = el("div", undefined, "export-block");
  box.dataset.kind = item.kind;
  const heading = el("h3", item.title);
  const copy = el("button", "Copy");
  copy.type = "button";
  const pre = el("pre");
  const code = el("code");
  // A one-line command wraps between its words only (a line break after a flag's "-" would read as another
  // flag): each word is a span that never breaks, the spaces between them text. Its text is item.text.
  if (item.text.includes("\n")) code.textContent = item.text;
  else item.text.split(" ").forEach((word, i) => { if (i) code.append(" "); code.append(el("span", word)); });
  pre.append(code);
  copy.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(item.text);
      say($("export-copied"), `${item.title}: copied.`);
    } catch {
      getSelection().selectAllChildren(pre);       // no clipboard permission: selected, for Ctrl+C
      say($("export-copied"), `${item.title}: selected; copy it with Ctrl+C (⌘C).`);
    }
  });
  heading.append(copy);
  box.append(heading, el("p", item.follows, "note"), pre);
  return box;
}

$("export").addEventListener("toggle", drawBlocks);
window.addEventListener("pycore-update", drawBlocks);

// --- pasted launch settings into the form ----------------------------------------------------------------------

$("export-apply").addEventListener("click", () => {
  const answer = JSON.parse(window.pycoreLaunchRead($("export-text").value));
  if (answer.error) { say($("export-status"), answer.error, true); return; }
  say($("export-status"), answer.message);
  if (answer.set.length) setInputs(answer.set);
});

// --- calibration ------------------------------------------------------------------------------------------------

function fillList(id, items) {
  $(id).replaceChildren(...items.map((text) => el("li", text)));
  $(id).hidden = !items.length;
}

function calibrate() {
  const answer = JSON.parse(window.pycoreCalibrate($("calibrate-text").value, requestQuery()));
  overrides = answer.overrides || [];
  $("calibrate-result").hidden = !!answer.error;
  if (answer.error) { say($("calibrate-status"), answer.error, true); return; }
  const shown = answer.display;
  say($("calibrate-status"), "");
  const headers = [...$("calibrate-table").tHead.rows[0].cells].map((th) => th.textContent);
  $("calibrate-table").tBodies[0].replaceChildren(...shown.rows.map((row) => {
    const tr = el("tr");
    tr.append(el("td", row.label), ...["measured", "estimated", "difference", "calibrated"]
      .map((key) => el("td", row[key], "num")), el("td", row.override));
    // each cell names its column, which a phone shows beside it in place of the header (style.css)
    [...tr.cells].forEach((cell, i) => { cell.dataset.label = headers[i]; });
    return tr;
  }));
  $("calibrate-unit").textContent = answer.unit_note;
  $("calibrate-apply-note").textContent = answer.apply_note;
  $("calibrate-apply").hidden = !overrides.length;
  fillList("calibrate-checks", shown.checks);
  fillList("calibrate-notes", shown.notes);
  fillList("calibrate-read", shown.read);
  fillList("calibrate-sources", shown.sources);
}

$("calibrate-run").addEventListener("click", calibrate);
$("calibrate-apply").addEventListener("click", () => {
  setInputs(overrides);
  calibrate();            // the same text against the calibrated setup: its estimate now meets the figures
});

// --- Python ready ------------------------------------------------------------------------------------------------

function ready() {
  if (!window.pycoreLaunch) return;
  for (const id of CONTROLS) $(id).disabled = false;
  drawBlocks();
}

window.addEventListener("pycore-ready", ready);
ready();
