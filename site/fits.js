// What fits on my GPUs: pycore estimates every preset for this workload; this lists and sorts them.
import { el, formQuery, requestQuery } from "./app.js";
import { numberText } from "./format.js";

let fitsRows = [];
let fitsSort = "headroom_bytes";

function showFits() {
  const count = Math.max(1, Math.min(4096, parseInt(document.getElementById("fits-count").value, 10) || 1));
  const params = new URLSearchParams(requestQuery());
  params.set("gpus", String(count));
  const payload = JSON.parse(window.pycoreFits(params.toString()));
  fitsRows = payload.rows;
  drawFits();
}

function drawFits() {
  const table = document.getElementById("fits-table");
  const body = table.querySelector("tbody");
  body.replaceChildren();
  table.hidden = !fitsRows.length;
  const rows = [...fitsRows].sort((x, y) => fitsSort === "id" ? x.id.localeCompare(y.id)
    : fitsSort === "params" ? y.params - x.params : (y.headroom_bytes ?? -Infinity) - (x.headroom_bytes ?? -Infinity));
  const workload = new URLSearchParams(formQuery());
  // each row's link is its own model's: no layout, and no checkpoint bytes read for the model in the form
  for (const key of ["model", "config", "name", "tp", "pp", "dp", "fsdp", "zero", "weight_bytes", "weight_files"]) {
    workload.delete(key);
  }
  for (const row of rows) {
    const tr = el("tr", undefined, `fits-${row.status}`);
    const link = el("a", row.id);
    const query = new URLSearchParams(workload);
    for (const [key, value] of row.query || [["model", row.id]]) query.set(key, value);
    link.href = `?${query.toString()}`;
    const name = el("td");
    name.append(link);
    // pycore words the size cell (pycore.output.report.fit_size_text).
    tr.append(name, el("td", numberText(row.params), "num"), el("td", row.size_text, "num"),
      el("td", [Object.entries(row.layout).map(([k, v]) => `${k}=${v}`).join(" "), row.note].filter(Boolean).join(" — ")));
    body.append(tr);
  }
}

document.getElementById("fits-run").addEventListener("click", showFits);
for (const button of document.querySelectorAll("#fits-table [data-sort]")) {
  button.addEventListener("click", () => { fitsSort = button.dataset.sort; drawFits(); });
}

