// Drag-and-drop for upload forms: dropped files go into the form's file input and
// the form is submitted as usual, so the server sees exactly what the plain form sends.
(function () {
  "use strict";
  document.querySelectorAll("[data-dropzone]").forEach(function (form) {
    var input = form.querySelector("input[type=file]");
    var hint = form.querySelector("[data-drop-hint]");
    if (!input) { return; }
    if (hint) { hint.hidden = false; }
    ["dragenter", "dragover"].forEach(function (name) {
      form.addEventListener(name, function (event) {
        event.preventDefault();
        form.classList.add("dragging");
      });
    });
    ["dragleave", "drop"].forEach(function (name) {
      form.addEventListener(name, function (event) {
        event.preventDefault();
        form.classList.remove("dragging");
      });
    });
    form.addEventListener("drop", function (event) {
      var files = event.dataTransfer && event.dataTransfer.files;
      if (!files || !files.length) { return; }
      input.files = files;
      if (hint) { hint.textContent = files.length + " file(s) ready: uploading…"; }
      form.requestSubmit ? form.requestSubmit() : form.submit();
    });
  });
})();
