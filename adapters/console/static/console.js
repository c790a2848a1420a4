// OTA console: live refresh. An element with data-refresh="URL" has its
// content replaced by a fresh server-rendered copy every data-every
// seconds (default 5), while the page is visible: a tab in the background
// costs the database nothing. Nothing else runs in the browser.
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
