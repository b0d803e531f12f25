// New-run form: switching the algorithm swaps in its default hyperparameters and PBT mutation
// (its learning-rate names), unless the user has already edited them.
(function () {
  "use strict";
  const defaults = JSON.parse(document.getElementById("hyperparameter-defaults").textContent);
  const algorithm = document.getElementById("id_algorithm");
  const box = document.getElementById("id_hyperparameters");
  const mutations = JSON.parse(document.getElementById("mutation-defaults").textContent);
  const mutationBox = document.getElementById("id_mutation");
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
    previous = algorithm.value;
    showHelp();
  });
  if (same(box.value, defaults[algorithm.value])) box.value = JSON.stringify(defaults[algorithm.value], null, 2);
  showHelp();
})();
