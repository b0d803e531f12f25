// All-agents page: score against the line's cumulative env steps, one colour per lineage;
// hover names the agent, a click opens its page.
(function () {
  "use strict";

  const points = JSON.parse(document.getElementById("scatter-points").textContent);
  const agentUrl = JSON.parse(document.getElementById("agent-url").textContent);

  function draw() {
    if (!points.length || typeof Plotly === "undefined") return;
    const lines = new Map();
    for (const p of points) {
      const key = p.lineage === null ? "no line" : "line of #" + p.lineage;
      if (!lines.has(key)) lines.set(key, []);
      lines.get(key).push(p);
    }
    const traces = [...lines].map(([name, pts]) => ({
      name: name,
      type: "scatter",
      mode: "markers",
      x: pts.map((p) => p.total_env_steps),
      y: pts.map((p) => p.score),
      customdata: pts.map((p) => p.id),
      text: pts.map((p) => "agent #" + p.id + "<br>generation " + p.generation + " · pod " + p.pod),
      hovertemplate: "%{text}<br>env steps of the line %{x:,}<br>score %{y:.3f}<extra>%{fullData.name}</extra>",
      marker: { size: 8, opacity: 0.8 },
    }));
    const chart = document.getElementById("scatter-chart");
    Plotly.newPlot(
      chart,
      traces,
      {
        margin: { l: 60, r: 16, t: 16, b: 44 },
        height: 340,
        xaxis: { title: { text: "env steps of the line (cumulative)" }, automargin: true },
        yaxis: { title: { text: "validation score" }, automargin: true },
        showlegend: traces.length <= 12,
        hovermode: "closest",
      },
      { displaylogo: false, responsive: true }
    );
    chart.on("plotly_click", (event) => {
      const id = event.points[0].customdata;
      window.location.href = agentUrl.replace(/\/0\/$/, "/" + id + "/");
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", draw);
  else draw();
})();
