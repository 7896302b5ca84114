// Read the checkpoint (issue 30): only each chosen file's header bytes are read (Blob.slice, never the whole
// file), as many as pycore asks for (web.header_need); pycore sums the tensors' bytes by pool (web.header_summary)
// and the page sets weight_bytes and weight_files from its answer. Nothing is sent anywhere; all is textContent.
import { editDone, el, fillForm, formQuery, update } from "./app.js";

const $ = (id) => document.getElementById(id);
const MAX_READS = 64;        // a GGUF header doubles its read each time: 1 MiB to 100 MB is 7 reads

function say(text, failed = false) {
  $("checkpoint-status").textContent = text;
  $("checkpoint-status").className = failed ? "import-status failed" : "import-status";
}

/** The first bytes of ``file`` that hold its header, read in slices of the lengths pycore asks for. */
async function headerBytes(file) {
  let data = new Uint8Array(0);
  for (let i = 0; i < MAX_READS; i++) {
    const need = window.pycoreHeaderNeed(file.name, file.size, data);
    if (!need || need <= data.length) break;
    data = new Uint8Array(await file.slice(0, need).arrayBuffer());
  }
  return data;
}

async function readCheckpoint(files) {
  say(`Reading the headers of ${files.length === 1 ? files[0].name.slice(0, 80) : files.length + " files"}…`);
  let answer;
  try {
    const read = [];
    for (const file of files) read.push([file.name, file.size, await headerBytes(file)]);
    answer = JSON.parse(window.pycoreHeaderSummary(read));
  } catch (error) {
    answer = { error: `Checkpoint: the files could not be read (${String(error).slice(0, 200)}).` };
  }
  $("checkpoint-table").hidden = !!answer.error;
  $("checkpoint-notes").hidden = true;
  if (answer.error) { say(answer.error, true); return; }
  $("checkpoint-table").tBodies[0].replaceChildren(...answer.rows.map((row) => {
    const tr = el("tr");
    tr.append(el("td", row.label), el("td", row.bytes, "num"), el("td", row.text, "num"));
    return tr;
  }));
  $("checkpoint-notes").replaceChildren(...answer.notes.map((note) => el("li", note)));
  $("checkpoint-notes").hidden = !answer.notes.length;
  say(answer.message);
  const params = new URLSearchParams(formQuery());
  for (const [key, value] of answer.set) params.set(key, value);
  fillForm(params.toString());
  update("push");
  editDone();
}

$("checkpoint-files").addEventListener("change", (event) => {
  const files = [...event.target.files];
  if (files.length) readCheckpoint(files);
});

function ready() {
  if (window.pycoreHeaderNeed) $("checkpoint-files").disabled = false;
}

window.addEventListener("pycore-ready", ready);
ready();
