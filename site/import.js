// config.json import (paste, upload, hub fetch): pycore reads the file; this only moves text around.
import { editDone, fillForm, form, formQuery, update } from "./app.js";
import { rememberImport } from "./picker.js";

const importStatus = document.getElementById("import-status");

/** A config.json's text into the form as pycore expresses it (web.import_config); its message, or its refusal. */
export function importConfig(text, origin, hub = "") {
  const answer = JSON.parse(window.pycoreImport(text, hub));
  if (answer.error) {
    importStatus.textContent = `${origin}: ${answer.error}`;
    importStatus.className = "import-status failed";
    return `${origin}: ${answer.error}`;
  }
  const params = new URLSearchParams(formQuery());
  for (const el of form.querySelectorAll('[data-field] [data-key]')) {
    if (el.closest('fieldset[data-group="model"]')) params.delete(el.dataset.key);
  }
  for (const [key, value] of answer.query) params.set(key, value);
  fillForm(params.toString());
  rememberImport(answer.choice, answer.query);       // listed first in the model picker from now on
  importStatus.textContent = [`${origin}: ${answer.message}`, ...(answer.warnings || [])].join(" ");
  importStatus.className = "import-status";
  update("push");
  editDone();
  return "";
}

document.getElementById("import-apply").addEventListener("click", () =>
  importConfig(document.getElementById("import-text").value, "Pasted config.json"));
document.getElementById("import-file").addEventListener("change", async (event) => {
  const file = event.target.files[0];
  if (file) importConfig(await file.text(), file.name.slice(0, 80));
});
document.getElementById("import-fetch").addEventListener("click", async () => {
  const id = document.getElementById("import-hub").value.trim();
  if (!/^[A-Za-z0-9][\w.-]*\/[\w.-]+$/.test(id)) {
    importStatus.textContent = "Hub id: expected owner/name, such as meta-llama/Llama-3.1-8B.";
    importStatus.className = "import-status failed";
    return;
  }
  importStatus.textContent = `Fetching ${id} from the Hugging Face hub…`;
  importStatus.className = "import-status";
  let response;
  try {
    response = await fetch(`https://huggingface.co/${id}/resolve/main/config.json`);
  } catch {
    response = null;
  }
  if (!response || !response.ok) {
    const why = !response ? "no answer (offline, or blocked)" :
      response.status === 401 || response.status === 403 ? `status ${response.status}: a gated or private model` :
      `status ${response.status}`;
    importStatus.textContent = `The hub refused ${id} (${why}). Download its config.json where you are signed in, then paste it or choose the file.`;
    importStatus.className = "import-status failed";
    return;
  }
  importConfig(await response.text(), id, id);
});

