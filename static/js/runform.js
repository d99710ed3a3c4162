// The run form's model controls (no inline script: the page's CSP allows only our files).
// "Tick all", "Untick all" and "only this" change the model boxes, then fire one change event so that
// htmx asks for the new estimate (blueprints/_estimate.html). Without JavaScript the controls stay hidden
// and "Update the estimate" does the same through the server.
(function () {
  "use strict";

  function boxes(form) {
    return Array.prototype.slice.call(form.querySelectorAll('input[type="checkbox"][name="models"]'));
  }

  function changed(form) {
    var first = boxes(form)[0];
    if (first) first.dispatchEvent(new Event("change", {bubbles: true}));
  }

  function setUp(form) {
    if (form.dataset.runform) return;
    form.dataset.runform = "1";
    form.querySelectorAll(".model-controls, .only-this").forEach(function (el) { el.hidden = false; });
    form.addEventListener("click", function (event) {
      var button = event.target.closest("button[data-models], button[data-only]");
      if (!button || !form.contains(button)) return;
      event.preventDefault();
      var only = button.getAttribute("data-only");
      var all = button.getAttribute("data-models") === "all";
      boxes(form).forEach(function (box) {
        box.checked = only !== null ? box.value === only : all;
      });
      changed(form);
    });
  }

  function init() {
    document.querySelectorAll("form.run-form").forEach(setUp);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
  document.addEventListener("htmx:afterSettle", init);
})();
