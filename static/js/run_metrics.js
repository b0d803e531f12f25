// Training curves (run page and agent page): every generation's telemetry against the
// cumulative env steps of its line, one line per lineage, pod or agent, with a metric menu,
// smoothing and a log-x option. Data: GET <api>?names=... (webapp/runs/selectors/curves.py); on the
// run page, live `metrics` events (re-dispatched by run_live.js as "paddock:run-event") append
// points, and generation boundaries (pod.update, leaderboard.update) refetch the whole set.
(function () {
  "use strict";

  const cfgNode = document.getElementById("metrics-config");
  if (!cfgNode) return;
  const cfg = JSON.parse(cfgNode.textContent);
  const $ = (sel) => document.querySelector(sel);
  const chartId = "metrics-chart";
  const state = {
    curves: [], // [{generation_id, pod, number, agent_id, parent_id, lineage, depth, status, points: {...}}]
    metrics: cfg.metrics, // name -> label
    metric: cfg.default_metric,
    group: cfg.group,
    smoothing: 0,
    logx: false,
    refetchTimer: null,
    drawTimer: null,
  };
  window.paddockMetrics = state; // for tests

  // TensorBoard's smoothing: an exponential moving average, debiased at the start, restarted
  // at each generation (a child's curve is not averaged with its parent's).
  function smooth(values, weight) {
    if (!weight) return values.slice();
    const out = [];
    let last = 0;
    let n = 0;
    for (const v of values) {
      if (v === null || v === undefined) {
        out.push(null);
        continue;
      }
      last = last * weight + (1 - weight) * v;
      n += 1;
      out.push(last / (1 - Math.pow(weight, n)));
    }
    return out;
  }

  function groupKey(curve) {
    if (state.group === "pod") return "pod " + curve.pod;
    if (state.group === "agent") return curve.agent_id !== null ? "agent #" + curve.agent_id : "generation " + curve.generation_id;
    return curve.lineage !== null ? "line of #" + curve.lineage : "new line, pod " + curve.pod;
  }

  function owner(curve) {
    const who = curve.agent_id !== null ? "agent #" + curve.agent_id : "training (pod " + curve.pod + ")";
    return who + "<br>pod " + curve.pod + " · generation " + curve.depth + " of its line";
  }

  function traces() {
    const groups = new Map();
    for (const curve of state.curves) {
      const key = groupKey(curve);
      if (!groups.has(key)) groups.set(key, { x: [], y: [], text: [] });
      const g = groups.get(key);
      const pts = curve.points;
      const ys = smooth(pts[state.metric] || [], state.smoothing);
      if (g.x.length) {
        // a gap between generations: a child's curve is not joined to the previous segment
        g.x.push(null);
        g.y.push(null);
        g.text.push("");
      }
      const who = owner(curve);
      for (let i = 0; i < pts.total_env_steps.length; i++) {
        g.x.push(pts.total_env_steps[i]);
        g.y.push(ys[i]);
        g.text.push(who);
      }
    }
    const out = [];
    for (const [name, g] of groups) {
      out.push({
        name: name,
        x: g.x,
        y: g.y,
        text: g.text,
        mode: "lines",
        type: "scatter",
        connectgaps: false,
        hovertemplate: "%{text}<br>env steps %{x:,}<br>" + state.metrics[state.metric] + " %{y:.4g}<extra>%{fullData.name}</extra>",
      });
    }
    return out;
  }

  function draw() {
    state.drawTimer = null;
    const chart = document.getElementById(chartId);
    if (typeof Plotly === "undefined" || !chart) return;
    const hasData = state.curves.some((c) => c.points.total_env_steps.length);
    const empty = $("#metrics-empty");
    if (empty) empty.hidden = hasData;
    chart.hidden = !hasData;
    if (!hasData) return;
    Plotly.react(
      chartId,
      traces(),
      {
        margin: { l: 64, r: 16, t: 28, b: 44 },
        height: 320,
        xaxis: {
          title: { text: "env steps of the line (cumulative)" },
          type: state.logx ? "log" : "linear",
          automargin: true,
        },
        yaxis: { title: { text: state.metrics[state.metric], standoff: 8 }, automargin: true },
        legend: { orientation: "h", x: 0, y: 1.02, yanchor: "bottom" },
        hovermode: "closest",
      },
      { displaylogo: false, responsive: true }
    );
    chart.dataset.traces = String(chart.data ? chart.data.length : 0);
  }

  function scheduleDraw() {
    if (!state.drawTimer) state.drawTimer = setTimeout(draw, 150);
  }

  async function fetchCurves() {
    state.refetchTimer = null;
    const names = Object.keys(state.metrics).join(",");
    const response = await fetch(cfg.api + "?names=" + encodeURIComponent(names), { credentials: "same-origin" });
    if (!response.ok) return;
    const body = await response.json();
    state.curves = body.curves;
    draw();
  }

  function scheduleRefetch() {
    if (!state.refetchTimer) state.refetchTimer = setTimeout(fetchCurves, 1500);
  }

  function onRunEvent(msg) {
    if (msg.type === "metrics") {
      let curve = state.curves.find((c) => c.generation_id === msg.curve.generation_id);
      if (!curve) {
        curve = { ...msg.curve, points: { total_env_steps: [], env_steps: [], elapsed_s: [] } };
        for (const name of Object.keys(state.metrics)) curve.points[name] = [];
        state.curves.push(curve);
      }
      const last = curve.points.env_steps[curve.points.env_steps.length - 1];
      if (last !== undefined && msg.point.env_steps <= last) return; // already have it
      for (const key of Object.keys(curve.points)) curve.points[key].push(msg.point[key] ?? null);
      scheduleDraw();
    } else if (msg.type === "leaderboard.update" || msg.type === "run.snapshot") {
      scheduleRefetch(); // a generation ended: its agent id and lineage are known now
    }
  }

  function bind() {
    const select = $("#metric-select");
    select.value = state.metric;
    select.addEventListener("change", () => {
      state.metric = select.value;
      draw();
    });
    const group = $("#metric-group");
    if (group) {
      group.value = state.group;
      group.addEventListener("change", () => {
        state.group = group.value;
        draw();
      });
    }
    const smoothing = $("#metric-smoothing");
    smoothing.addEventListener("input", () => {
      state.smoothing = Number(smoothing.value);
      $("#metric-smoothing-value").textContent = state.smoothing.toFixed(2);
      scheduleDraw();
    });
    const logx = $("#metric-logx");
    logx.addEventListener("change", () => {
      state.logx = logx.checked;
      draw();
    });
    document.addEventListener("paddock:run-event", (event) => onRunEvent(event.detail));
  }

  function start() {
    bind();
    fetchCurves();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
