// Keyboard for the Pairs page (no inline script: the page's CSP allows only our files).
// a / b / t choose A, B or a tie; r goes to the reason; Enter submits (from the reason too); Esc leaves the
// reason; n goes to the next pair (skips this one before judging). Keys do nothing while typing in a field.
(function () {
  "use strict";

  var CHOICES = {a: "left", b: "right", t: "tie"};

  function typing(event) {
    var t = event.target;
    if (event.altKey || event.ctrlKey || event.metaKey) return true;
    if (!t) return false;
    if (t.isContentEditable || /^(TEXTAREA|SELECT)$/.test(t.tagName)) return true;
    return t.tagName === "INPUT" && !/^(radio|checkbox|button|submit)$/.test(t.type);
  }

  function pairForm() {
    return document.querySelector("form.pair-form");
  }

  function choose(form, value) {
    var radio = form.querySelector('input[name="winner"][value="' + value + '"]');
    if (radio) { radio.checked = true; radio.focus(); }
  }

  function submit(form) {
    if (form.requestSubmit) form.requestSubmit(); else form.submit();
  }

  document.addEventListener("keydown", function (event) {
    var form = pairForm();
    if (event.key === "Escape" && form && form.contains(event.target) && event.target.name === "reason") {
      event.target.blur();
      event.preventDefault();
      return;
    }
    if (typing(event)) return;
    var handled = true;
    if (form && CHOICES[event.key]) {
      choose(form, CHOICES[event.key]);
    } else if (form && event.key === "r") {
      form.querySelector('input[name="reason"]').focus();
    } else if (form && event.key === "Enter" && !/^(A|BUTTON)$/.test(event.target.tagName)) {
      submit(form);
    } else if (event.key === "n" && document.querySelector('#pair a[data-key="next"]')) {
      window.location.href = document.querySelector('#pair a[data-key="next"]').href;
    } else {
      handled = false;
    }
    if (handled) event.preventDefault();
  });
})();
