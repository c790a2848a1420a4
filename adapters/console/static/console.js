// OTA console: live refresh and the upload form's progress. An element
// with data-refresh="URL" has its content replaced by a fresh
// server-rendered copy every data-every seconds (default 5), while the
// page is visible: a tab in the background costs the database nothing.
"use strict";
document.querySelectorAll("[data-refresh]").forEach(function (el) {
  var every = (parseInt(el.dataset.every, 10) || 5) * 1000;
  function tick() {
    if (document.hidden) { setTimeout(tick, every); return; }
    fetch(el.dataset.refresh, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (r) {
        // A redirect means the session ended: keep the last picture.
        if (!r.ok || r.redirected) { return null; }
        return r.text();
      })
      .then(function (html) {
        if (html !== null) { el.innerHTML = html; el.dataset.refreshed = String(Date.now()); }
      })
      .catch(function () {})
      .then(function () { setTimeout(tick, every); });
  }
  setTimeout(tick, every);
});

// The upload form sends its file as the raw body of one XMLHttpRequest to
// the console's upload endpoint (form.dataset.upload), so the browser
// reports the bytes sent and the bar shows them; the session's CSRF token
// goes in a header. The answer names the page that shows what the file
// says about itself, or the reason it was refused.
(function () {
  var form = document.getElementById("upload-form");
  if (!form) { return; }
  var input = document.getElementById("artifact-file");
  var status = document.getElementById("upload-status");
  var bar = document.getElementById("upload-progress");
  var percent = document.getElementById("upload-percent");
  var error = document.getElementById("upload-error");
  var button = document.getElementById("upload-button");
  function fail(msg) {
    error.textContent = msg; error.hidden = false;
    status.hidden = true; button.disabled = false;
  }
  form.addEventListener("submit", function (ev) {
    ev.preventDefault();
    var file = input.files[0];
    if (!file) { fail("Choose a file to upload."); return; }
    error.hidden = true; button.disabled = true;
    bar.value = 0; percent.textContent = "0%"; status.hidden = false;
    var xhr = new XMLHttpRequest();
    xhr.open("POST", form.dataset.upload + "?filename=" + encodeURIComponent(file.name));
    xhr.setRequestHeader("X-CSRF-Token", form.dataset.csrf);
    xhr.setRequestHeader("Content-Type", "application/octet-stream");
    xhr.upload.addEventListener("progress", function (e) {
      if (!e.lengthComputable) { return; }
      var p = Math.floor(e.loaded * 100 / e.total);
      bar.value = p; percent.textContent = p + "%";
    });
    xhr.addEventListener("load", function () {
      var answer = null;
      try { answer = JSON.parse(xhr.responseText); } catch (e) { answer = null; }
      if (xhr.status >= 200 && xhr.status < 300 && answer && answer.location) {
        bar.value = 100; percent.textContent = "100%";
        window.location.assign(answer.location);
        return;
      }
      fail((answer && answer.error) || "The upload failed (HTTP " + xhr.status + ").");
    });
    xhr.addEventListener("error", function () { fail("The upload failed: the connection to the service broke."); });
    xhr.send(file);
  });
})();
