// Read the checkpoint (issue 30): only each chosen file's header bytes are read (Blob.slice, never the whole
// file), as many as pycore asks for (web.header_need); pycore sums the tensors' bytes by pool (web.header_summary)
// and the page sets weight_bytes and weight_files from its answer. Nothing is sent anywhere; all is textContent.
import { editDone, el, fillForm, formQuery, setInputPairs, update } from "./app.js";
import { importConfig } from "./import.js";

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
  show(answer);
}

// --- the same from the Hugging Face hub, on the user's click only ----------------------------------------------

const HUB = "https://huggingface.co";

class HubRefused extends Error {}

/** The first ``end`` bytes of a hub file by an HTTP range request, and the file's size from Content-Range (-1 when
 * not given). A server that ignores the range is read no further than ``end`` bytes: the rest is cancelled. */
async function hubRange(url, end) {
  const response = await fetch(url, { headers: { Range: `bytes=0-${end - 1}` } });
  if (!response.ok) throw new HubRefused(String(response.status));
  const total = /\/(\d+)$/.exec(response.headers.get("Content-Range") || "");
  const data = new Uint8Array(end);
  let have = 0;
  const reader = response.body.getReader();
  while (have < end) {
    const { done, value } = await reader.read();
    if (done) break;
    const take = value.subarray(0, end - have);
    data.set(take, have);
    have += take.length;
  }
  if (have >= end) reader.cancel().catch(() => {});
  return { data: data.subarray(0, have), size: total ? Number(total[1]) : -1 };
}

/** One shard's header bytes: ranges of the lengths pycore asks for, as for a local file. */
async function hubHeader(base, name) {
  let data = new Uint8Array(0);
  let size = -1;
  for (let i = 0; i < MAX_READS; i++) {
    const need = window.pycoreHeaderNeed(name, size, data);
    if (!need || need <= data.length) break;
    ({ data, size } = await hubRange(`${base}/${encodeURIComponent(name)}`, need));
  }
  return [name, size, data];
}

/** The hub's index and every shard's header (all shards at once), or the single model.safetensors; {error} when
 * pycore refuses the index. */
async function hubFiles(id) {
  const base = `${HUB}/${id}/resolve/main`;
  const index = await fetch(`${base}/model.safetensors.index.json`);
  if (index.status === 404) return [await hubHeader(base, "model.safetensors")];
  if (!index.ok) throw new HubRefused(String(index.status));
  const text = new Uint8Array(await index.arrayBuffer());
  const listed = JSON.parse(window.pycoreHeaderShards(text));
  if (listed.error) return listed;
  const headers = await Promise.all(listed.shards.map((name) => hubHeader(base, name)));
  return [["model.safetensors.index.json", text.length, text], ...headers];
}

async function readFromHub() {
  const id = $("checkpoint-hub").value.trim();
  if (!/^[A-Za-z0-9][\w.-]*\/[\w.-]+$/.test(id)) {
    say("Hub id: expected owner/name, such as meta-llama/Llama-3.1-8B.", true);
    return;
  }
  say(`Reading ${id}'s checkpoint headers from the Hugging Face hub…`);
  let answer;
  try {
    const files = await hubFiles(id);
    answer = files.error ? files : JSON.parse(window.pycoreHeaderSummary(files, id));
  } catch (error) {
    const status = error instanceof HubRefused ? error.message : "";
    const why = !status ? "no answer (offline, or blocked)" : status === "401" || status === "403"
      ? `status ${status}: a gated or private model` : `status ${status}`;
    answer = { error: `The hub refused ${id}'s checkpoint (${why}). Download its shards where you are signed in and choose them above.` };
  }
  show(answer.error ? answer : { ...answer, message: `${answer.message} ${await hubConfig(id)}`.trim() });
}

/** The repository's config.json, imported first so that the weights read belong to the model in the form; what
 * became of it, in words for the status line. */
async function hubConfig(id) {
  let response;
  try {
    response = await fetch(`${HUB}/${id}/resolve/main/config.json`);
  } catch {
    response = null;
  }
  if (!response || !response.ok) {
    return `Its config.json could not be read (${response ? "status " + response.status : "no answer"}): the model in the form is estimated with these weights.`;
  }
  const refused = importConfig(await response.text(), `${id} config.json`, id);
  return refused ? `${refused}; the model in the form is estimated with these weights.` : `Model read from its config.json.`;
}

$("checkpoint-fetch").addEventListener("click", readFromHub);

/** pycore's answer on the page: its rows and message, and weight_bytes / weight_files in the form and link. */
function show(answer) {
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
  setInputPairs(params, answer.set);
  fillForm(params.toString());
  update("push");
  editDone();
}

$("checkpoint-files").addEventListener("change", (event) => {
  const files = [...event.target.files];
  if (files.length) readCheckpoint(files);
});

function ready() {
  if (!window.pycoreHeaderNeed) return;
  for (const id of ["checkpoint-files", "checkpoint-hub", "checkpoint-fetch"]) $(id).disabled = false;
}

window.addEventListener("pycore-ready", ready);
ready();
