// Compare pages: "Differences only" hides the rows of a settings table whose values are equal.
(function () {
  "use strict";
  for (const box of document.querySelectorAll("input[data-diff-toggle]")) {
    const table = document.getElementById(box.dataset.diffToggle);
    if (!table) continue;
    const apply = () => table.classList.toggle("diff-only", box.checked);
    box.addEventListener("change", apply);
    apply();
  }
})();
