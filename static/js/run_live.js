// Live run page: keeps the leaderboard, pods, budget and chart current over the run's
// WebSocket (protocol: docs/websocket.md).
//
// The server sends a `run.snapshot` first, then deltas numbered by the run's `seq`. Deltas
// older than what a part of the page already shows are ignored (events of different
// processes may arrive slightly out of order). A sequence number still missing after
// GAP_GRACE_MS, or any reconnect, makes the page ask for a fresh snapshot. Reconnects back
// off exponentially (with jitter) up to MAX_BACKOFF_MS. Once the run has ended (finished,
// failed, cancelled) the page takes one last snapshot, closes the socket and stops
// reconnecting: the indicator then shows how the run ended instead of "live".
(function () {
  "use strict";

  const GAP_GRACE_MS = 800;
  const BASE_BACKOFF_MS = 500;
  const MAX_BACKOFF_MS = 15000;
  const FINAL_CLOSE_CODES = { 4401: "signed out", 4403: "forbidden", 4404: "not found" };
  const TERMINAL = ["finished", "failed", "cancelled"];

  const cfg = JSON.parse(document.getElementById("run-live-config").textContent);
  const history = JSON.parse(document.getElementById("score-history").textContent);
  const $ = (sel, root) => (root || document).querySelector(sel);
  const indicator = $("#live-indicator");
  const tbody = $("#leaderboard tbody");

  const state = {
    ws: null,
    attempt: 0,
    synced: false, // a snapshot has been applied on this connection
    seq: 0, // highest seq seen
    runSeq: 0,
    boardSeq: 0,
    podSeq: {}, // pod index -> seq of the last pod.update / progress applied
    missing: new Set(),
    gapTimer: null,
    run: null,
    ended: false, // the run is terminal and the page holds its final state; no reconnects
    lastBoardKey: "",
    baseTitle: document.title,
    initialStatus: document.getElementById("run-status").dataset.status,
  };
  window.paddockLive = state; // for tests and the latency benchmark

  // --- formatting -----------------------------------------------------------------------

  // One formatter for the page and the server (static/js/format.js, webapp/core/formatting.py).
  const fmt = window.PaddockFormat;
  const fmtNumber = fmt.number;
  const fmtCount = fmt.count;
  const fmtDuration = fmt.duration;
  const fmtHyper = (values) => fmt.hyperparameters(values, cfg.hp_keys);

  function agentUrl(id) {
    return cfg.agent_url.replace(/\/0\/$/, "/" + id + "/");
  }

  // --- indicator and connection ---------------------------------------------------------

  function setIndicator(name, text) {
    indicator.dataset.state = name;
    indicator.className = "live-indicator " + name;
    indicator.textContent = text || name;
  }

  function send(message) {
    if (state.ws && state.ws.readyState === WebSocket.OPEN) state.ws.send(JSON.stringify(message));
  }

  function requestSnapshot() {
    state.synced = false;
    state.missing.clear();
    send({ type: "snapshot.request" });
  }

  function connect() {
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    const ws = new WebSocket(scheme + location.host + cfg.ws_path);
    state.ws = ws;
    state.synced = false;
    ws.onmessage = (event) => {
      if (ws !== state.ws) return;
      handle(JSON.parse(event.data));
    };
    ws.onclose = (event) => {
      if (ws !== state.ws) return;
      state.synced = false;
      if (state.ended) return;
      if (event.code in FINAL_CLOSE_CODES) {
        setIndicator("closed", FINAL_CLOSE_CODES[event.code]);
        return;
      }
      setIndicator("reconnecting");
      const delay = Math.min(MAX_BACKOFF_MS, BASE_BACKOFF_MS * 2 ** state.attempt) * (0.5 + Math.random() / 2);
      state.attempt += 1;
      setTimeout(connect, delay);
    };
  }

  // --- messages -------------------------------------------------------------------------

  // Events still missing after the grace period (late ones arrive within it) mean a resync.
  function armGapTimer() {
    if (state.gapTimer) return;
    state.gapTimer = setTimeout(() => {
      state.gapTimer = null;
      if (state.missing.size) requestSnapshot();
    }, GAP_GRACE_MS);
  }

  function noteSeq(seq) {
    if (seq > state.seq + 1) {
      for (let s = state.seq + 1; s < seq; s += 1) state.missing.add(s);
      armGapTimer();
    }
    state.missing.delete(seq);
    state.seq = Math.max(state.seq, seq);
  }

  // A heartbeat carries the run's latest seq: events up to it that never came (a lost tail,
  // which no later event would reveal) count as missing.
  function noteLatest(seq) {
    if (seq <= state.seq) return;
    for (let s = state.seq + 1; s <= seq; s += 1) state.missing.add(s);
    armGapTimer();
  }

  function handle(msg) {
    // other scripts of the page (run_metrics.js) follow the same events
    document.dispatchEvent(new CustomEvent("paddock:run-event", { detail: msg }));
    if (msg.type === "run.snapshot") {
      applySnapshot(msg);
      return;
    }
    if (!state.synced || typeof msg.seq !== "number") return; // the coming snapshot covers it
    if (msg.type === "heartbeat") {
      noteLatest(msg.seq);
      return;
    }
    noteSeq(msg.seq);
    if (msg.type === "run.update" && msg.seq > state.runSeq) {
      state.runSeq = msg.seq;
      applyRun(msg.run);
    } else if (msg.type === "leaderboard.update" && msg.seq > state.boardSeq) {
      state.boardSeq = msg.seq;
      applyLeaderboard(msg.leaderboard, msg.added || []);
      applyVerdict(msg.verdict);
    } else if (msg.type === "pod.update" && msg.seq > (state.podSeq[msg.pod.index] || 0)) {
      state.podSeq[msg.pod.index] = msg.seq;
      applyPod(msg.pod);
    } else if (msg.type === "progress" && msg.seq > (state.podSeq[msg.pod] || 0)) {
      state.podSeq[msg.pod] = msg.seq;
      applyProgress(msg);
    }
  }

  function applySnapshot(msg) {
    state.seq = state.runSeq = state.boardSeq = msg.seq;
    state.podSeq = {};
    state.missing.clear();
    state.synced = true;
    state.attempt = 0;
    applyRun(msg.run);
    for (const pod of msg.pods) {
      state.podSeq[pod.index] = msg.seq;
      applyPod(pod);
    }
    applyLeaderboard(msg.leaderboard, []);
    applyVerdict(msg.verdict);
    if (TERMINAL.includes(msg.run.status)) endLive(msg.run.status);
    else setIndicator("live");
  }

  // The run is over and the snapshot just applied is its final state: nothing more will
  // change, so stop listening (and reconnecting).
  function endLive(status) {
    state.ended = true;
    setIndicator("ended", status);
    if (state.ws) state.ws.close(1000, "run ended");
  }

  // --- run, budget, controls ------------------------------------------------------------

  // Seen live: a run that ends while the page is open says so in the tab title and a notice
  // (a page opened on an ended run shows its state without announcing it).
  function announceEnd(previous, run) {
    if (!previous || TERMINAL.includes(previous) || !TERMINAL.includes(run.status)) return;
    const mark = { finished: "✓", failed: "✗", cancelled: "■" }[run.status];
    document.title = mark + " " + run.status + " · " + state.baseTitle;
    const notice = $("#run-notice");
    notice.textContent = "This run has " + run.status + (run.status_reason ? ": " + run.status_reason : ".");
    notice.className = "run-notice " + run.status;
    notice.hidden = false;
    if (window.Notification && Notification.permission === "granted") {
      new Notification(run.name + " " + run.status, { body: run.status_reason || "" });
    }
  }

  function applyRun(run) {
    announceEnd(state.run ? state.run.status : state.initialStatus, run);
    state.run = run;
    if (run.started_at) $("#run-started").textContent = run.started_at.slice(0, 16).replace("T", " ") + " UTC";
    const status = $("#run-status");
    status.textContent = run.status;
    status.dataset.status = run.status;
    status.className = "badge " + run.status;
    const best = $("#best-score");
    // a validation window under 63 days: the score is annualised noise (selectors.score_note)
    best.textContent = run.score_note && run.best_score !== null ? "n/a" : fmtNumber(run.best_score, 3);
    if (run.score_note) best.title = run.score_note;
    else best.removeAttribute("title");
    const chartNote = $("#score-chart-note");
    if (chartNote) {
      chartNote.hidden = !run.score_note;
      $("#score-chart-note-text").textContent = run.score_note || "";
    }
    $("#num-pods").textContent = run.num_pods;
    $("#agents-count").textContent = run.agents; // trained by the pods
    if (run.ensembles !== undefined) {
      $("#ensembles-count").textContent = run.ensembles;
      $("#ensembles-plural").textContent = run.ensembles === 1 ? "" : "s";
    }
    if (run.ensemble_k !== undefined) applyEnsembleButton(run.ensemble_k);
    $("#status-reason").textContent = run.status_reason || "";
    const allowed = {
      start: run.status === "queued",
      pause: run.status === "running",
      resume: run.status === "paused",
      stop: !TERMINAL.includes(run.status),
      scale: !TERMINAL.includes(run.status) && run.status !== "finishing",
    };
    for (const form of document.querySelectorAll("#controls form[data-action]")) {
      const button = form.querySelector("button");
      button.disabled = !allowed[form.dataset.action];
    }
    applyBudget(run);
    // Pods stopped with the run are not all announced one by one: a final snapshot has them.
    if (TERMINAL.includes(run.status) && !state.ended && state.synced) requestSnapshot();
  }

  // The "Build ensemble" button follows the leaderboard: enabled (top-K) once it holds two
  // agents, the server's rule (selectors.ensemble_k).
  function applyEnsembleButton(k) {
    const button = $("#btn-ensemble");
    const input = $('#ensemble-form input[name="k"]');
    if (!button || !input) return;
    input.value = k === null ? "" : k;
    button.disabled = k === null;
    button.textContent = k === null ? "Build ensemble" : "Build top-" + k + " ensemble";
    button.title = k === null
      ? "an ensemble needs at least 2 agents on the leaderboard"
      : "one agent acting with the mean action of the leaderboard's top " + k +
        ": scored on validation, with a bundle and backtests like any agent (built once per set of members)";
  }

  // The ETA is the server's (webapp.runs.selectors.eta: the binding limit's time left), counted down
  // between events.
  const etaState = { seconds: null, at: 0, active: false };
  function showEta() {
    const left = etaState.seconds === null ? null : Math.max(0, etaState.seconds - (Date.now() - etaState.at) / 1000);
    $("#budget-eta").textContent = etaState.active && left !== null ? fmtDuration(left) : "–";
  }
  setInterval(showEta, 1000);

  function applyBudget(run) {
    const b = run.budget;
    if (!b) return;
    $("#budget-gpu").textContent = fmtNumber(b.gpu_hours_used, 3);
    $("#budget-steps").textContent = fmtCount(b.env_steps_used);
    $("#budget-pods").textContent = b.pods_running;
    $("#budget-pods-max").textContent = b.max_concurrent_pods;
    // The spent fraction is the server's (selectors.budget_progress): the largest over the
    // budget's limits, the same number the runs list and the API show.
    const progress = b.progress || { fraction: null, limits: {} };
    const used = progress.fraction;
    const wall = $("#budget-wall");
    // Whole percents, as the server renders the first paint.
    if (wall && progress.limits.wall_clock !== undefined) wall.textContent = Math.round(progress.limits.wall_clock * 100) + " %";
    $("#budget-bar").style.width = used === null ? "0%" : (used * 100).toFixed(1) + "%";
    $("#budget-left").textContent = used === null ? "no cap" : Math.round(used * 100) + " % used";
    $("#budget-limit").textContent = progress.limit_label ? "(" + progress.limit_label + ")" : "";
    const eta = b.eta || { seconds: null, label: "" };
    etaState.seconds = eta.seconds;
    etaState.at = Date.now();
    etaState.active = ["running", "finishing"].includes(run.status);
    const etaLimit = $("#budget-eta-limit");
    if (etaLimit) etaLimit.textContent = etaState.active && eta.label ? "(" + eta.label + ")" : "";
    showEta();
  }

  // --- pods -----------------------------------------------------------------------------

  function podCard(index) {
    let card = $('#pods .pod-card[data-pod-index="' + index + '"]');
    if (card) return card;
    const empty = $("#no-pods");
    if (empty) empty.remove();
    card = document.createElement("div");
    card.className = "pod-card";
    card.dataset.podIndex = index;
    card.innerHTML =
      '<div class="pod-head"><strong>Pod ' + index + '</strong> <span class="badge pod-state"></span></div>' +
      '<div class="pod-gen">generation <span class="pod-gen-number">–</span> · <span class="pod-done">0</span> done</div>' +
      '<div class="pod-speed"><span class="pod-sps">–</span> steps/s</div>' +
      '<div class="progress"><span class="pod-progress" style="width:0%"></span></div>' +
      '<div class="pod-why muted"></div>' +
      '<div class="pod-failure error"></div>';
    const cards = [...document.querySelectorAll("#pods .pod-card")];
    const after = cards.find((c) => Number(c.dataset.podIndex) > index);
    $("#pods").insertBefore(card, after || null);
    return card;
  }

  function applyPod(pod) {
    const card = podCard(pod.index);
    card.dataset.state = pod.state;
    const badge = $(".pod-state", card);
    badge.textContent = pod.state;
    badge.className = "badge pod-state " + pod.state;
    $(".pod-done", card).textContent = pod.generations_done;
    const gen = pod.generation;
    $(".pod-gen-number", card).textContent = gen ? gen.number : "–";
    // Throughput and the bar describe the generation training now; a pod that is not
    // training (queued, idle, stopped, retired) shows neither, not its last values.
    const training = pod.state === "training";
    $(".pod-sps", card).textContent = training ? fmtCount(pod.steps_per_s) : "–";
    const total = gen && gen.env_steps ? gen.env_steps : cfg.generation_steps;
    const done = training ? pod.env_steps : 0;
    $(".pod-progress", card).style.width = Math.min(100, (100 * done) / total).toFixed(1) + "%";
    $(".pod-why", card).textContent = pod.state === "queued" ? pod.queued_reason || "" : "";
    $(".pod-failure", card).textContent = pod.last_failure || "";
  }

  function applyProgress(msg) {
    const card = podCard(msg.pod);
    // Only a training pod moves its bar (a queued one shows its next generation at 0 %).
    if (card.dataset.state !== "training") return;
    $(".pod-gen-number", card).textContent = msg.generation;
    $(".pod-sps", card).textContent = fmtCount(msg.steps_per_s);
    const total = msg.env_steps_total || cfg.generation_steps;
    $(".pod-progress", card).style.width = Math.min(100, (100 * msg.env_steps) / total).toFixed(1) + "%";
  }

  // --- leaderboard and chart ------------------------------------------------------------

  const COLUMNS = ["rank", "agent", "score", "untrained", "sharpe", "vs_equal_weight", "vs_qqq", "dsr", "generation", "parent", "pod", "algorithm", "hyperparameters", "env_steps", "age"];

  function newRow(agent) {
    const tr = document.createElement("tr");
    tr.dataset.agentId = agent.id;
    for (const col of COLUMNS) {
      const td = document.createElement("td");
      td.dataset.col = col;
      if (["rank", "score", "dsr", "generation", "pod", "env_steps"].includes(col)) td.className = "num";
      tr.appendChild(td);
    }
    tr.querySelector('[data-col="agent"]').innerHTML = '<a href="' + agentUrl(agent.id) + '">#' + agent.id + "</a>";
    return tr;
  }

  function fillRow(tr, agent, rank) {
    const cell = (col) => tr.querySelector('[data-col="' + col + '"]');
    tr.dataset.score = agent.score === null ? "" : agent.score;
    cell("rank").textContent = rank;
    // a validation window shorter than the short-window rule's minimum (63 days): every
    // Sharpe-based figure is n/a, the reason in the cells' title (baselines.note)
    const note = (agent.baselines || {}).note || "";
    const withheld = (value, text) => (note && value !== null && value !== undefined ? "n/a" : text);
    for (const col of ["score", "untrained", "sharpe", "vs_equal_weight", "vs_qqq", "dsr"]) {
      if (note) cell(col).title = note;
      else cell(col).removeAttribute("title");
    }
    // "score ± SE": the standard error from the validation sub-windows (selectors.agent_payload)
    const se = agent.score !== null && agent.score_se !== null && agent.score_se !== undefined;
    cell("score").textContent = withheld(
      agent.score,
      fmtNumber(agent.score, 3) + (se ? " ± " + fmtNumber(agent.score_se, 3) : "")
    );
    if (agent.within_one_se && !(note && agent.score !== null)) {
      const mark = document.createElement("span");
      mark.className = "badge one-se";
      mark.title =
        "within one standard error of the best: a member of the run's deliverable, the ensemble of the agents within one SE of the best";
      mark.textContent = "one SE";
      cell("score").append(" ", mark);
    }
    // the server's texts of the baselines on the same validation days, like with like:
    // score next to the untrained policy's score, Sharpe ratio next to Sharpe ratios, and
    // the excess return and Sharpe difference over 1/N and QQQ (selectors.agent_payload)
    const base = agent.baselines || {};
    const texts = base.texts || {};
    for (const col of ["untrained", "sharpe", "vs_equal_weight", "vs_qqq"]) {
      cell(col).className = "baselines";
      cell(col).textContent = texts[col] || "–";
    }
    if (base.within_noise) {
      const mark = document.createElement("span");
      mark.className = "badge within-noise";
      mark.title = "the score is within one standard deviation of its sub-window Sharpe ratios of the untrained policy's";
      mark.textContent = "within noise";
      cell("untrained").append(" ", mark);
    }
    // Deflated Sharpe Ratios, against 1/N (trial ledger) and raw against zero (server text)
    cell("dsr").textContent = agent.dsr_text || "–";
    cell("generation").textContent = agent.generation;
    cell("parent").innerHTML = agent.parent_id
      ? '<a href="' + agentUrl(agent.parent_id) + '">#' + agent.parent_id + "</a>"
      : '<span class="muted">fresh</span>';
    cell("pod").textContent = agent.pod;
    cell("algorithm").textContent = (agent.algorithm || "").toUpperCase();
    const code = document.createElement("code");
    code.textContent = fmtHyper(agent.hyperparameters);
    cell("hyperparameters").replaceChildren(code);
    const steps = agent.env_steps ?? (agent.metrics && agent.metrics.env_steps);
    if (steps !== undefined && steps !== null) {
      cell("env_steps").textContent = fmtCount(steps) + " / " + fmtCount(agent.total_env_steps ?? steps);
    }
    cell("age").dataset.createdAt = agent.created_at;
  }

  function applyLeaderboard(all, added) {
    const agents = all.slice(0, cfg.max_rows);
    const existing = new Map([...tbody.querySelectorAll("tr[data-agent-id]")].map((tr) => [tr.dataset.agentId, tr]));
    const keep = new Set();
    agents.forEach((agent, i) => {
      const id = String(agent.id);
      keep.add(id);
      let tr = existing.get(id);
      if (!tr) {
        tr = newRow(agent);
        tr.classList.add("fresh");
        setTimeout(() => tr.classList.remove("fresh"), 1500);
      }
      fillRow(tr, agent, i + 1);
      if (tbody.children[i] !== tr) tbody.insertBefore(tr, tbody.children[i] || null);
    });
    for (const [id, tr] of existing) if (!keep.has(id)) tr.remove();
    $("#leaderboard-empty").hidden = agents.length > 0;
    updateAges();
    pushHistory(all);
    document.dispatchEvent(new CustomEvent("paddock:leaderboard", { detail: { added: added } }));
  }

  function median(sorted) {
    const n = sorted.length;
    return n % 2 ? sorted[(n - 1) / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  }

  // The leaderboard as a whole against the untrained policy (baselines.leaderboard_verdict).
  function applyVerdict(verdict) {
    const el = $("#leaderboard-verdict");
    if (!el || !verdict) return;
    el.textContent = verdict.text;
    el.hidden = !verdict.text;
    el.dataset.aboveNoise = String(verdict.above_noise);
    el.dataset.judged = String(verdict.judged);
  }

  let chartReady = false;

  // Until the first agent scores, the chart is a message, not empty axes with made-up ranges.
  function initChart() {
    if (chartReady || typeof Plotly === "undefined") return;
    const chart = $("#score-chart");
    if (!history.length) {
      chart.classList.add("chart-empty");
      chart.textContent = "Waiting for the first agent: the chart starts when a generation submits one.";
      return;
    }
    chart.classList.remove("chart-empty");
    chart.textContent = "";
    const t = history.map((p) => p.t);
    Plotly.newPlot(
      "score-chart",
      [
        { x: t, y: history.map((p) => p.best), name: "best", mode: "lines+markers", line: { color: "#2f6fed" } },
        { x: t, y: history.map((p) => p.median), name: "median", mode: "lines", line: { color: "#8a94a8", dash: "dot" } },
      ],
      {
        margin: { l: 64, r: 16, t: 28, b: 36 },
        height: 260,
        // One line of "HH:MM:SS" ticks: Plotly's default adds a second line with the date, which
        // collided with the legend. Hover shows the full ISO time.
        xaxis: { type: "date", tickformat: "%H:%M:%S", hoverformat: "%Y-%m-%d %H:%M:%S", automargin: true },
        yaxis: { title: { text: "validation score", standoff: 8 }, tickformat: ".3f", automargin: true },
        legend: { orientation: "h", x: 0, y: 1.02, yanchor: "bottom" },
      },
      { displaylogo: false, responsive: true }
    );
    chartReady = true;
  }

  function pushHistory(agents) {
    const scores = agents.map((a) => a.score).filter((s) => s !== null).sort((a, b) => a - b);
    if (!scores.length) return;
    const best = scores[scores.length - 1];
    const med = median(scores);
    const key = best + "/" + med;
    if (key === state.lastBoardKey) return;
    const last = history[history.length - 1];
    state.lastBoardKey = key;
    if (last && last.best === best && last.median === med) return;
    const point = { t: new Date().toISOString(), best: best, median: med };
    history.push(point);
    if (!chartReady) initChart();
    else Plotly.extendTraces("score-chart", { x: [[point.t], [point.t]], y: [[best], [med]] }, [0, 1]);
  }

  // Ages stop at the run's end: a finished run's agents and the run itself do not keep ageing.
  function updateAges() {
    const age = $("#run-age");
    const startedIso = (state.run && state.run.started_at) || age.dataset.startedAt;
    const finishedIso = state.run ? state.run.finished_at : age.dataset.finishedAt;
    const finished = finishedIso ? Date.parse(finishedIso) : NaN;
    const now = Number.isNaN(finished) ? Date.now() : finished;
    const started = startedIso ? Date.parse(startedIso) : NaN;
    $("#run-age-label").textContent = Number.isNaN(finished) ? "Age" : "Ran for";
    age.textContent = Number.isNaN(started) ? "–" : fmtDuration((now - started) / 1000);
    for (const td of tbody.querySelectorAll('td[data-col="age"]')) {
      const created = Date.parse(td.dataset.createdAt);
      if (!Number.isNaN(created)) td.textContent = fmtDuration((now - created) / 1000);
    }
  }

  // --- controls (API calls; the WebSocket brings the new state) ---------------------------

  function bindControls() {
    for (const form of document.querySelectorAll("#controls form[data-action]")) {
      form.addEventListener("submit", async (event) => {
        event.preventDefault();
        if (form.dataset.confirm && !window.confirm(form.dataset.confirm)) return;
        const action = form.dataset.action;
        const body = {};
        if (action === "scale") body.num_pods = Number(form.querySelector("input[name=num_pods]").value);
        if (action === "stop") body.backtest = form.querySelector("input[name=backtest]").checked;
        const error = $("#control-error");
        error.textContent = "";
        const response = await fetch(cfg.api + action + "/", {
          method: "POST",
          credentials: "same-origin",
          headers: {
            "Content-Type": "application/json",
            "X-CSRFToken": form.querySelector("input[name=csrfmiddlewaretoken]").value,
          },
          body: JSON.stringify(body),
        });
        if (!response.ok) {
          const data = await response.json().catch(() => ({}));
          error.textContent = data.error || "The server answered " + response.status + ".";
        }
      });
    }
  }

  initChart();
  bindControls();
  updateAges();
  setInterval(updateAges, 1000);
  setIndicator("connecting");
  connect();
})();
