// Dataset page: weekly closing prices of every ticker (data from the page); the legend toggles them.
(function () {
  "use strict";
  const preview = JSON.parse(document.getElementById("price-preview").textContent);
  const target = document.getElementById("price-chart");
  if (!target || typeof Plotly === "undefined") return;
  if (!preview.series.length) {
    target.textContent = "No price column to chart.";
    return;
  }
  const traces = preview.series.map((s) => ({ x: s.dates, y: s.close, name: s.ticker, mode: "lines" }));
  Plotly.newPlot(
    target,
    traces,
    {
      margin: { l: 50, r: 10, t: 10, b: 40 },
      height: 380,
      yaxis: { title: { text: "USD" }, type: "log" },
      legend: { itemclick: "toggle", itemdoubleclick: "toggleothers" },
    },
    { displaylogo: false, responsive: true }
  );
})();
