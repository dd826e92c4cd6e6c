// A figure drawn wider than the text column (a two-panel plot, a GPU run's benchmark) is shown
// scaled down; a click on it opens it at full size, where its labels and legends are legible.
function ampLinkFullSize(img) {
  if (img.closest("a") || img.naturalWidth <= img.clientWidth + 1) {
    return;
  }
  const link = document.createElement("a");
  link.href = img.currentSrc || img.src;
  link.target = "_blank";
  link.className = "amp-full-size";
  link.title = "Open the figure at full size";
  img.replaceWith(link);
  link.appendChild(img);
}

window.addEventListener("load", () => {
  document.querySelectorAll("article img").forEach(ampLinkFullSize);
});

// A cell's printed output mixes sentences with column-aligned rows (tables printed with padded
// columns). Sentences wrap at the text column (amp.css); a row keeps its columns on one line, and
// the block scrolls sideways where a row is wider than the column. A row is a line with a run of
// two or more spaces between words, not after a sentence's end (some messages put two spaces
// there). Only blocks of plain text are touched (Pygments opens each block with an empty span; a
// block with coloured spans, a traceback, is left as it is).
const AMP_ROW = /[^\s.!?] {2,}\S/;

function ampKeepRows(pre) {
  const coloured = [...pre.children].some((child) => child.textContent !== "");
  if (coloured || !AMP_ROW.test(pre.textContent)) {
    return;
  }
  const lines = pre.textContent.split("\n");
  pre.textContent = "";
  lines.forEach((line, index) => {
    if (AMP_ROW.test(line)) {
      const row = document.createElement("span");
      row.className = "amp-row";
      row.textContent = line;
      pre.appendChild(row);
    } else {
      pre.appendChild(document.createTextNode(line));
    }
    if (index < lines.length - 1) {
      pre.appendChild(document.createTextNode("\n"));
    }
  });
}

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("div.cell_output pre").forEach(ampKeepRows);
});
