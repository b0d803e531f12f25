// Draws the Plotly figures of report and compare pages. Each chart is a
// <div data-plotly-figure="ID"> whose figure ({data, layout}) was built on the server and
// embedded as <script type="application/json" id="ID">; Plotly itself is served locally.
(function () {
  "use strict";
  function draw(div) {
    var source = document.getElementById(div.getAttribute("data-plotly-figure"));
    if (!source || !window.Plotly) { return; }
    var figure = JSON.parse(source.textContent);
    window.Plotly.newPlot(div, figure.data, figure.layout, { responsive: true, displaylogo: false });
  }
  function drawAll() {
    document.querySelectorAll("[data-plotly-figure]").forEach(draw);
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", drawAll);
  } else {
    drawAll();
  }
})();
