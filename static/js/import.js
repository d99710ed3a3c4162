// The import page's folder picker: sends each file's path inside the chosen folder beside the files
// (a browser posts only their names), so the server reads the folder as import_blueprints reads one.
// Files and folders whose names start with "." (.git) are dropped before sending, as the command skips them.
(function () {
  "use strict";

  function hidden(path) {
    return path.split("/").some(function (part) { return part.charAt(0) === "."; });
  }

  function setUp(input) {
    var form = input.form;
    var paths = form.querySelector("[data-folder-paths]");
    var status = document.getElementById("folder-status");
    var limit = status ? parseInt(status.getAttribute("data-max-files"), 10) : NaN;

    input.addEventListener("change", function () {
      var files = Array.prototype.slice.call(input.files || []);
      var kept = files.filter(function (file) { return !hidden(file.webkitRelativePath || file.name); });
      if (kept.length !== files.length && typeof DataTransfer === "function") {
        var transfer = new DataTransfer();
        kept.forEach(function (file) { transfer.items.add(file); });
        input.files = transfer.files;
      } else {
        kept = files;
      }
      paths.value = JSON.stringify(kept.map(function (file) { return file.webkitRelativePath || file.name; }));
      if (!status) {
        return;
      }
      var skipped = files.length - kept.length;
      var text = kept.length + " file" + (kept.length === 1 ? "" : "s") + " chosen";
      if (skipped) {
        text += " (" + skipped + " hidden file" + (skipped === 1 ? "" : "s") + " skipped)";
      }
      if (!isNaN(limit) && kept.length > limit) {
        text += ": more than " + limit + " files cannot be sent at once; choose a smaller folder or use the command";
        status.classList.add("form-error");
      } else {
        status.classList.remove("form-error");
      }
      status.textContent = text + ".";
    });
  }

  document.querySelectorAll("input[data-folder-input]").forEach(setUp);
})();
