// New-run page: before starting, estimate env steps per generation, the generations the
// chosen budget allows and the wall time at the speed the workers measured on recent
// generations of the same algorithm (webapp/runs/selectors/estimate.py gives budgets and speeds).
(function () {
  "use strict";
  const node = document.getElementById("estimate-inputs");
  const out = document.getElementById("run-estimate");
  if (!node || !out) return;
  const inputs = JSON.parse(node.textContent);
  const $ = (id) => document.getElementById(id);

  function fmtCount(v) {
    return Math.floor(v).toLocaleString("en-US");
  }
  function fmtDuration(s) {
    if (!Number.isFinite(s)) return "–";
    if (s < 60) return Math.round(s) + " s";
    if (s < 3600) return Math.round(s / 60) + " min";
    if (s < 86400) return (s / 3600).toFixed(1) + " h";
    return (s / 86400).toFixed(1) + " d";
  }

  function update() {
    const steps = Number($("id_generation_steps").value);
    const pods = Number($("id_num_pods").value);
    const budget = inputs.budgets[$("id_budget").value];
    const speed = inputs.speed[$("id_algorithm").value];
    const lines = [];
    if (!(steps > 0) || !(pods > 0) || !budget) {
      out.textContent = "Choose a budget, pods and env steps per generation for an estimate.";
      return;
    }
    lines.push("Env steps per generation: " + fmtCount(steps) + ".");
    // Pods train at once up to the run's pods, the budget's limit and the training workers
    // alive (one generation each); with no worker alive the estimate says so.
    const workers = inputs.training_workers;
    let parallel = Math.min(pods, budget.max_concurrent_pods);
    const why = [pods + " pod" + (pods === 1 ? "" : "s"), "budget allows " + budget.max_concurrent_pods];
    if (typeof workers === "number") {
      why.push(workers + " training worker" + (workers === 1 ? "" : "s") + " alive");
      parallel = Math.min(parallel, workers);
    }
    if (parallel > 0) {
      lines.push(
        "Pods training at once: " + parallel + " (" + why.join(", ") + ")" +
          (typeof workers === "number" ? "." : "; at most that many if as many training workers run (how many are alive is unknown now).")
      );
    } else {
      lines.push("No training worker is alive: the run waits until one starts (" + why.join(", ") + ").");
    }
    const limits = [];
    if (budget.env_steps_left !== null) limits.push([Math.floor(budget.env_steps_left / steps), "env steps left"]);
    if (speed && budget.device_seconds_left !== null) {
      limits.push([Math.floor((budget.device_seconds_left * speed.steps_per_s) / steps), "device hours left"]);
    }
    let generations = null;
    if (limits.length) {
      limits.sort((a, b) => a[0] - b[0]);
      generations = limits[0][0];
      lines.push("Generations the budget allows: " + fmtCount(generations) + " (limit: " + limits[0][1] + ").");
    } else {
      lines.push("The budget sets no env-step or device-hour cap: the run trains until stopped or a time limit.");
    }
    if (speed) {
      const perGen = steps / speed.steps_per_s;
      let wall = generations === null || parallel < 1 ? null : Math.ceil(generations / parallel) * perGen;
      const caps = [budget.max_wall_clock_s, budget.deadline_s].filter((v) => v !== null);
      let capped = "";
      if (caps.length && (wall === null || Math.min(...caps) < wall)) {
        wall = Math.min(...caps);
        capped = " (ends at the budget's time limit)";
      }
      lines.push(
        "At " + fmtCount(speed.steps_per_s) + " env steps/s per pod (measured on the last " + speed.generations +
          " generations), a generation takes about " + fmtDuration(perGen) +
          (parallel < 1 ? "." : "; " + parallel + " at once" +
            (wall === null ? "." : ": about " + fmtDuration(wall) + " in all" + capped + "."))
      );
    } else {
      lines.push("No measured speed yet for this algorithm: the first generations will tell.");
    }
    out.textContent = lines.join(" ");
  }

  for (const id of ["id_generation_steps", "id_num_pods", "id_budget", "id_algorithm"]) {
    const el = $(id);
    if (el) el.addEventListener("input", update), el.addEventListener("change", update);
  }
  update();
})();
