// Words and numbers the page writes. Sizes come from pycore as text (its units.format_bytes) when the
// payload has them; the fallbacks here only format bytes pycore computed, for payloads from before that.

const GIB = 2 ** 30;
const TIB = 2 ** 40;
// Where sizes switch to TiB: pycore.base.units.TIB_FROM_BYTES, written into the page by build.py (as data,
// read, never executed), so these few sizes the page words itself (chart axes, headroom) switch where
// pycore's own texts do.
const UNITS = JSON.parse(globalThis.document?.getElementById("units-table")?.textContent || "{}");
const TIB_FROM = UNITS.tib_from_bytes;
// Digits grouped by hand, not with Intl.NumberFormat: its first use in a page loads the ICU number data,
// 45 ms of a cold load's main thread on a 2-core machine (a CPU profile of the first paint), before the
// first frame. en-US grouping: "1,234.56".
function grouped(number) {
  const [whole, fraction] = number.split(".");
  return whole.replace(/\B(?=(\d{3})+$)/g, ",") + (fraction === undefined ? "" : `.${fraction}`);
}

function two(x) {
  return grouped(x.toFixed(2));
}

/** "1,234.56 GiB", or TiB from 1,024 GiB up (pycore.base.units.format_bytes). */
export function bytesText(bytes) {
  const magnitude = Math.abs(bytes);
  return TIB_FROM !== undefined && magnitude >= TIB_FROM
    ? `${two(bytes / TIB)} TiB`
    : `${two(bytes / GIB)} GiB`;
}

/** Vendor units (10^9 bytes): "1,553.26 GB". */
export function gbText(bytes) {
  return `${two(bytes / 1e9)} GB`;
}

/** ["1,234.56", "GiB"] from "1,234.56 GiB". */
export function splitUnit(text) {
  const at = text.lastIndexOf(" ");
  return at < 0 ? [text, ""] : [text.slice(0, at), text.slice(at + 1)];
}

/** "1,234,567". */
export function numberText(n) {
  return grouped(String(Number(n)));
}

/** "1 GPU", "2 GPUs", "1 sequence", "1,024 tokens". */
export function plural(n, one, many = `${one}s`) {
  return `${numberText(n)} ${n === 1 ? one : many}`;
}

function distance(a, b) {
  const row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let diagonal = row[0];
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const next = Math.min(row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] === b[j - 1] ? 0 : 1));
      diagonal = row[j];
      row[j] = next;
    }
  }
  return row[b.length];
}

/** The catalog id closest to what was typed ("mixtral" -> "mixtral-8x7b-v0.1"), or null. */
export function didYouMean(typed, ids) {
  const word = typed.trim().toLowerCase().slice(0, 80);
  if (!word) return null;
  const byLength = (list) => list.sort((x, y) => x.length - y.length)[0];
  const starts = ids.filter((id) => id.toLowerCase().startsWith(word));
  if (starts.length) return byLength(starts);
  const contains = ids.filter((id) => id.toLowerCase().includes(word));
  if (contains.length) return byLength(contains);
  let best = null;
  let bestDistance = Math.max(2, Math.floor(word.length / 3)) + 1;
  for (const id of ids) {
    const d = distance(word, id.toLowerCase());
    if (d < bestDistance) [best, bestDistance] = [id, d];
  }
  return best;
}
