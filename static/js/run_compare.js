// Compare runs: best score against env steps (one line per run) and every agent's varying
// hyperparameters and score as parallel coordinates coloured by run (webapp/runs/selectors/compare.py).
(function () {
  "use strict";
  const curves = JSON.parse(document.getElementById("runs-curves").textContent);
  const parallel = JSON.parse(document.getElementById("runs-parallel").textContent);
  const palette = ["#2f6fed", "#e4572e", "#29a36a", "#8e44ad", "#f2a541", "#17becf", "#7f7f7f", "#bcbd22"];

  function draw() {
    if (typeof Plotly === "undefined") return;
    Plotly.newPlot(
      "runs-score-chart",
      curves.map((c, i) => ({
        // a short validation window: the line is drawn dotted and says its scores are n/a
        name: c.score_note ? c.name + " (scores " + c.score_note + ")" : c.name,
        x: c.env_steps,
        y: c.best,
        mode: "lines",
        line: { shape: "hv", color: palette[i % palette.length], dash: c.score_note ? "dot" : "solid" },
        hovertemplate: "%{x:,} env steps<br>best %{y:.3f}<extra>" + c.name + "</extra>",
      })),
      {
        margin: { l: 60, r: 16, t: 16, b: 44 },
        height: 320,
        xaxis: { title: { text: "env steps trained by the run" } },
        yaxis: { title: { text: "best validation score" } },
        legend: { orientation: "h", y: 1.02, yanchor: "bottom" },
      },
      { displaylogo: false, responsive: true }
    );
    const n = parallel.runs.length;
    const scale = parallel.runs.map((_, i) => [n > 1 ? i / (n - 1) : 0, palette[i % palette.length]]);
    Plotly.newPlot(
      "runs-parallel-chart",
      [
        {
          type: "parcoords",
          line: { color: parallel.run_index, colorscale: scale.length > 1 ? scale : [[0, palette[0]], [1, palette[0]]], cmin: 0, cmax: Math.max(1, n - 1) },
          dimensions: parallel.dimensions.map((d) => ({ label: d.label, values: d.values })),
        },
      ],
      { margin: { l: 60, r: 60, t: 40, b: 20 }, height: 360 },
      { displaylogo: false, responsive: true }
    );
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", draw);
  else draw();
})();
