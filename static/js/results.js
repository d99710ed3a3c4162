// Keyboard for the results grid and a response page (no inline script: the pages' CSP allows only our files).
// Grid: j / k next and previous response, n next one below the threshold (or failed), o open it in place,
// Enter open its page, Esc close and back to the grid. Response page: j / k next and previous response,
// n next failure, a open every reflection, Esc back to the grid. Keys do nothing while typing in a field.
(function () {
  "use strict";

  function typing(event) {
    var t = event.target;
    return event.altKey || event.ctrlKey || event.metaKey ||
      (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName)));
  }

  function cells() {
    return Array.prototype.slice.call(document.querySelectorAll("table.grid td.gcell[data-response]"));
  }

  function focusCell(cell) {
    if (!cell) return;
    cells().forEach(function (c) { c.classList.remove("current"); });
    cell.classList.add("current");
    cell.focus();
    cell.scrollIntoView({block: "nearest", inline: "nearest"});
  }

  function step(list, from, delta) {
    var i = list.indexOf(from);
    if (i < 0) return list[delta > 0 ? 0 : list.length - 1];
    return list[Math.min(list.length - 1, Math.max(0, i + delta))];
  }

  function gridKeys(event) {
    var list = cells();
    if (!list.length) return false;
    var current = document.querySelector("table.grid td.gcell.current") || null;
    switch (event.key) {
      case "j": focusCell(step(list, current, 1)); return true;
      case "k": focusCell(step(list, current, -1)); return true;
      case "n": {
        var below = list.filter(function (c) { return c.classList.contains("below"); });
        var after = below.filter(function (c) { return !current || list.indexOf(c) > list.indexOf(current); });
        focusCell(after[0] || below[0]);
        return true;
      }
      case "o": {
        if (!current) { focusCell(list[0]); current = list[0]; }
        var details = current.querySelector("details");
        if (details) details.open = !details.open;
        return true;
      }
      case "Enter":
        if (current && document.activeElement === current) { window.location.href = current.dataset.response; return true; }
        return false;
      case "Escape":
        document.querySelectorAll("table.grid details[open]").forEach(function (d) { d.open = false; });
        if (current) current.focus();
        return true;
    }
    return false;
  }

  function link(rel) {
    return document.querySelector('a[data-key="' + rel + '"]');
  }

  function responseKeys(event) {
    var target = {j: "next", k: "previous", n: "next-failure", Escape: "grid"}[event.key];
    if (target && link(target)) { window.location.href = link(target).href; return true; }
    if (event.key === "a") { openAllReflections(); return true; }
    return false;
  }

  function openAllReflections() {
    document.querySelectorAll(".verdicts details:not(.raw-answer)").forEach(function (d) {
      d.open = true;
    });
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("[data-action='open-reflections']");
    if (button) openAllReflections();
    var cell = event.target.closest && event.target.closest("table.grid td.gcell[data-response]");
    if (cell) {
      cells().forEach(function (c) { c.classList.remove("current"); });
      cell.classList.add("current");
    }
  });

  // The grid's form applies a choice at once; the search box waits for Enter (one request per change,
  // never a second one when the box loses focus).
  document.addEventListener("change", function (event) {
    var form = event.target.closest && event.target.closest("form.grid-tools");
    if (form && event.target.type !== "search" && form.requestSubmit) form.requestSubmit();
  });

  document.addEventListener("keydown", function (event) {
    if (typing(event)) return;
    var handled = document.querySelector("table.grid") ? gridKeys(event) : responseKeys(event);
    if (handled) event.preventDefault();
  });
})();
