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
