// New-run form: switching the algorithm swaps in its default hyperparameters, PBT mutation
// (its learning-rate names) and generation size, unless the user has already edited them;
// switching the task kind swaps in that kind's default algorithm (direct for portfolio, PPO
// for stock trading: docs/default-selection.md) while the algorithm is still the other kind's.
(function () {
  "use strict";
  const defaults = JSON.parse(document.getElementById("hyperparameter-defaults").textContent);
  const algorithm = document.getElementById("id_algorithm");
  const box = document.getElementById("id_hyperparameters");
  const mutations = JSON.parse(document.getElementById("mutation-defaults").textContent);
  const mutationBox = document.getElementById("id_mutation");
  const perAlgorithm = document.getElementById("algorithm-defaults");
  const { kinds = {}, generation_steps: steps = {} } = perAlgorithm ? JSON.parse(perAlgorithm.textContent) : {};
  const kind = document.getElementById("id_kind");
  const stepsBox = document.getElementById("id_generation_steps");
  if (!algorithm || !box) return;

  const same = (text, value) => {
    try {
      return JSON.stringify(JSON.parse(text)) === JSON.stringify(value);
    } catch (err) {
      return false;
    }
  };
  const showHelp = () => {
    for (const list of document.querySelectorAll(".help-list")) list.hidden = list.dataset.algorithm !== algorithm.value;
  };
  let previous = algorithm.value;
  algorithm.addEventListener("change", () => {
    const untouched = !box.value.trim() || same(box.value, defaults[previous]);
    if (untouched) box.value = JSON.stringify(defaults[algorithm.value], null, 2);
    if (mutationBox && (!mutationBox.value.trim() || same(mutationBox.value, mutations[previous]))) {
      mutationBox.value = JSON.stringify(mutations[algorithm.value]);
    }
    if (stepsBox && (!stepsBox.value.trim() || Number(stepsBox.value) === steps[previous])) {
      if (steps[algorithm.value] !== undefined) stepsBox.value = String(steps[algorithm.value]);
    }
    previous = algorithm.value;
    showHelp();
  });
  let previousKind = kind ? kind.value : "";
  if (kind) {
    kind.addEventListener("change", () => {
      const wanted = kinds[kind.value];
      if (wanted && algorithm.value === kinds[previousKind] && algorithm.value !== wanted) {
        algorithm.value = wanted;
        algorithm.dispatchEvent(new Event("change"));
      }
      previousKind = kind.value;
    });
  }
  if (same(box.value, defaults[algorithm.value])) box.value = JSON.stringify(defaults[algorithm.value], null, 2);
  showHelp();
})();
