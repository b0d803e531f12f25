// Run page: once the run has finished, refresh the "Backtest reports" section (end-of-run
// backtests of the best agents) every few seconds until every report is done, without
// reloading the page. Only the section is fetched (GET <run>/reports/), and never while the
// run's WebSocket is open: the live page closes it when the run ends, and until then the
// reports cannot have changed.
(function () {
  "use strict";
  const POLL_MS = 3000;
  const GIVE_UP_MS = 10 * 60 * 1000;
  const started = Date.now();
  let timer = null;

  const section = () => document.getElementById("run-reports");
  const status = () => (document.getElementById("run-status") || {}).dataset || {};
  // done when every report is done, or when the server says the backtests could not run
  const complete = (el) => el && (el.dataset.refused || (Number(el.dataset.reports) > 0 && !el.dataset.pending));
  const socketOpen = () => {
    const live = window.paddockLive;
    return Boolean(live && live.ws && live.ws.readyState === WebSocket.OPEN);
  };
  const url = location.pathname.replace(/\/?$/, "/") + "reports/";

  async function refresh() {
    timer = null;
    if (!socketOpen()) {
      try {
        const response = await fetch(url, { credentials: "same-origin", headers: { Accept: "text/html" } });
        if (response.ok) {
          const doc = new DOMParser().parseFromString(await response.text(), "text/html");
          const fresh = doc.getElementById("run-reports");
          if (fresh && section()) section().replaceWith(fresh);
        }
      } catch (err) {
        // offline for a moment: try again at the next tick
      }
    }
    schedule();
  }

  function schedule() {
    if (timer || complete(section()) || Date.now() - started > GIVE_UP_MS) return;
    if (status().status === "finished") timer = setTimeout(refresh, POLL_MS);
  }

  const badge = document.getElementById("run-status");
  if (badge) new MutationObserver(schedule).observe(badge, { attributes: true, attributeFilter: ["data-status"] });
  schedule();
})();
