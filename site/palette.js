// The one table of the colours the page draws memory pools in. pycore gives every pool a style index
// (pycore.output.report.chart_styles: its place in the breakdown, then the pools only a chart or the comparison
// shows), the same index in the breakdown bar, both charts, their legend and the comparison; this turns the
// index into a colour and, past the palette's nine colours, a hatch, so no two pools drawn together look alike.
//
// Colours: Paul Tol's "muted" qualitative scheme, in his order (indigo, cyan, teal, green, olive, sand,
// rose, wine, purple; his pale grey, meant for missing data, left out): nine colours that stay distinct to
// people with the common forms of colour blindness. Paul Tol, "Colour schemes", SRON technical note
// SRON/EPS/TN/09-002, section "Qualitative colour schemes": https://personal.sron.nl/~pault/#sec:qualitative
// (https://personal.sron.nl/~pault/data/colourschemes.pdf).

export const PALETTE = ["#332288", "#88CCEE", "#44AA99", "#117733", "#999933", "#DDCC77", "#CC6677", "#882255", "#AA4499"];
// The second cue for index 9 and up: stripes of white over the colour, a different angle per round.
export const PATTERNS = ["solid", "diagonal", "horizontal", "vertical"];
const ANGLES = { diagonal: 45, horizontal: 0, vertical: 90 };

/** {color, pattern, name} of a style index: name ("#332288 solid") is what no two pools in one chart share. */
export function styleOf(index) {
  const i = Number.isInteger(index) && index >= 0 ? index : 0;
  const color = PALETTE[i % PALETTE.length];
  const pattern = PATTERNS[Math.floor(i / PALETTE.length) % PATTERNS.length];
  return { color, pattern, name: `${color} ${pattern}` };
}

/** A CSS background for an element (a bar segment, a swatch): the colour, striped past the ninth. */
export function cssBackground(index) {
  const { color, pattern } = styleOf(index);
  if (pattern === "solid") return color;
  // Stripes 3 px of white at 55% over 4 px of colour: the colour stays the larger part.
  return `repeating-linear-gradient(${ANGLES[pattern] + 90}deg, ${color} 0 4px, rgba(255, 255, 255, 0.55) 4px 7px), ${color}`;
}

/** Paints an element (segment or swatch) in a style index, or nothing for null; written only when it changes. */
export function paint(node, index) {
  if (index === null) {
    if (node.dataset.style !== undefined) {
      node.style.background = "";
      delete node.dataset.style;
    }
    return;
  }
  const { name } = styleOf(index);
  if (node.dataset.style !== name) {
    node.style.background = cssBackground(index);
    node.dataset.style = name;
  }
}

const tiles = new Map();

/** A canvas fill for a style index (uPlot's series fill): the colour, or a CanvasPattern of its stripes. */
export function canvasFill(ctx, index) {
  const { color, pattern, name } = styleOf(index);
  if (pattern === "solid") return color;
  let tile = tiles.get(name);
  if (!tile) {
    tile = document.createElement("canvas");
    tile.width = tile.height = 8;
    const t = tile.getContext("2d");
    t.fillStyle = color;
    t.fillRect(0, 0, 8, 8);
    t.strokeStyle = "rgba(255, 255, 255, 0.6)";
    t.lineWidth = 2.5;
    t.beginPath();
    if (pattern === "horizontal") { t.moveTo(0, 4); t.lineTo(8, 4); }
    else if (pattern === "vertical") { t.moveTo(4, 0); t.lineTo(4, 8); }
    else { t.moveTo(-2, 10); t.lineTo(10, -2); t.moveTo(-2, 2); t.lineTo(2, -2); t.moveTo(6, 10); t.lineTo(10, 6); }
    t.stroke();
    tiles.set(name, tile);
  }
  return ctx.createPattern(tile, "repeat");
}
