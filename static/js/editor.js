/* The blueprint editor: Ace (from the django-ace package) over a plain textarea.
 *
 * The textarea stays the source of truth for forms and htmx: every change is
 * copied back into it and announced with an `input` event, which htmx turns
 * into a debounced live-validation request. The server's answer carries the
 * gutter annotations as JSON in `data-annotations` on #validation-panel.
 * Without this script (or without Ace) the textarea works on its own.
 */
(function () {
  "use strict";

  var editor = null;
  var textarea = null;
  var baseline = null; // the text as last saved (or loaded)
  var pendingSave = null; // the text a save request in flight sent
  var leaving = false; // a normal form submit: do not ask before unload
  var markers = [];

  function currentText() {
    return editor ? editor.getValue() : textarea ? textarea.value : "";
  }

  function isDirty() {
    return textarea !== null && baseline !== null && currentText() !== baseline;
  }

  function prefersDark() {
    return window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches;
  }

  function setUp(area) {
    textarea = area;
    baseline = area.value;
    if (typeof window.ace === "undefined") {
      return; // the plain textarea stays
    }
    window.ace.config.set("basePath", area.dataset.aceBase || "");
    var holder = document.createElement("div");
    holder.className = "code-editor";
    holder.id = "code-editor";
    area.insertAdjacentElement("afterend", holder);
    editor = window.ace.edit(holder, {
      value: area.value,
      mode: "ace/mode/" + (area.dataset.codeEditor || "yaml"),
      theme: prefersDark() ? "ace/theme/tomorrow_night" : "ace/theme/tomorrow",
      useWorker: false, // our server is the validator; Ace's own YAML worker would disagree with it
      tabSize: 2,
      useSoftTabs: true,
      showPrintMargin: false,
      fontSize: "14px",
      enableKeyboardAccessibility: true,
      wrap: false,
    });
    editor.session.setUndoManager(new window.ace.UndoManager());
    editor.textInput.getElement().setAttribute("aria-label", "Blueprint text");
    editor.textInput.getElement().id = "editor-input";
    area.classList.add("enhanced");
    area.setAttribute("aria-hidden", "true");
    area.tabIndex = -1;
    var label = document.querySelector('label[for="' + area.id + '"]');
    if (label) {
      label.addEventListener("click", function (event) {
        event.preventDefault();
        editor.focus();
      });
    }

    editor.session.on("change", function () {
      area.value = editor.getValue();
      area.dispatchEvent(new Event("input", { bubbles: true }));
    });
    editor.commands.addCommand({
      name: "save",
      bindKey: { win: "Ctrl-S", mac: "Command-S" },
      exec: save,
    });
    applyAnnotations(document.getElementById("validation-panel"));
  }

  function applyAnnotations(panel) {
    if (!editor || !panel || !panel.dataset.annotations) {
      return;
    }
    var annotations = [];
    try {
      annotations = JSON.parse(panel.dataset.annotations);
    } catch (error) {
      return;
    }
    editor.session.setAnnotations(annotations);
    markers.forEach(function (id) {
      editor.session.removeMarker(id);
    });
    var Range = window.ace.require("ace/range").Range;
    markers = annotations.map(function (a) {
      var css = a.type === "error" ? "ace-line-error" : "ace-line-warning";
      return editor.session.addMarker(new Range(a.row, 0, a.row, 1), css, "fullLine");
    });
  }

  function goTo(line, column) {
    if (editor) {
      editor.gotoLine(line, Math.max(column - 1, 0), true);
      editor.scrollToLine(line - 1, true, true, function () {});
      editor.focus();
      return;
    }
    // A plain textarea: put the caret at the start of that line.
    var lines = textarea.value.split("\n");
    var offset = 0;
    for (var i = 0; i < line - 1 && i < lines.length; i++) {
      offset += lines[i].length + 1;
    }
    offset += Math.max(column - 1, 0);
    textarea.focus();
    textarea.setSelectionRange(offset, offset);
  }

  function save() {
    var form = document.getElementById("editor-form");
    if (form) {
      form.requestSubmit();
    }
  }

  document.addEventListener("DOMContentLoaded", function () {
    var area = document.querySelector("textarea[data-code-editor]");
    if (!area) {
      return;
    }
    setUp(area);

    document.addEventListener("click", function (event) {
      var link = event.target.closest("[data-line]");
      if (!link) {
        return;
      }
      event.preventDefault();
      goTo(parseInt(link.dataset.line, 10) || 1, parseInt(link.dataset.column, 10) || 1);
    });

    document.addEventListener("keydown", function (event) {
      if ((event.ctrlKey || event.metaKey) && !event.altKey && event.key.toLowerCase() === "s") {
        event.preventDefault();
        save();
      }
    });

    var form = document.getElementById("editor-form");
    form.addEventListener("submit", function () {
      if (!form.hasAttribute("hx-post")) {
        leaving = true; // a full-page submit; htmx saves keep the page
      }
    });
    form.addEventListener("htmx:beforeRequest", function (event) {
      if (event.detail.elt === form) {
        pendingSave = currentText();
      }
    });

    document.body.addEventListener("htmx:afterSwap", function (event) {
      var target = event.detail.target;
      if (target && target.id === "validation-panel") {
        applyAnnotations(document.getElementById("validation-panel"));
      }
      var status = document.getElementById("save-status");
      if (status && status.dataset.saved === "true" && pendingSave !== null) {
        baseline = pendingSave;
        pendingSave = null;
      }
    });

    window.addEventListener("beforeunload", function (event) {
      if (!leaving && isDirty()) {
        event.preventDefault();
        event.returnValue = "";
      }
    });
  });
})();
