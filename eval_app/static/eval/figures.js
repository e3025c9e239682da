/* Keep every plotly figure as wide as its box.
 *
 * plotly sizes a figure once, when it is drawn, and again only on window
 * resizes. A figure drawn while the page is still being laid out (the grid
 * gains its other figures after the first one is drawn) or whose box changes
 * later (a filter, a font) would keep a stale width; a ResizeObserver redraws it
 * at its box's width whenever that box changes.
 */
(function () {
  "use strict";
  function watch() {
    if (!window.Plotly || !window.ResizeObserver) return;
    var observer = new ResizeObserver(function (entries) {
      entries.forEach(function (entry) {
        var figure = entry.target.querySelector(".plotly-graph-div");
        if (figure && figure._fullLayout) window.Plotly.Plots.resize(figure);
      });
    });
    document.querySelectorAll(".eval-figure").forEach(function (box) {
      observer.observe(box);
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", watch);
  } else {
    watch();
  }
})();
