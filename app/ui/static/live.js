// Live refresh of the dashboard's lists: every data-refresh milliseconds
// the page is fetched again and its #live region replaced. The button in
// the header pauses and resumes it (remembered in localStorage). Without
// JavaScript the pages work as they are; reload to refresh.
(function () {
  "use strict";
  var body = document.body;
  var every = parseInt(body.getAttribute("data-refresh") || "0", 10);
  var live = document.getElementById("live");
  var button = document.getElementById("live-toggle");
  if (!every || !live || !button || !window.fetch || !window.DOMParser) {
    return;
  }
  var key = "gitlease.ui.paused";
  var paused = false;
  try { paused = window.localStorage.getItem(key) === "1"; } catch (e) { paused = false; }
  var timer = null;

  function label() {
    button.textContent = paused ? "Resume refresh" : "Pause refresh";
    button.setAttribute("aria-pressed", paused ? "true" : "false");
  }

  function schedule() {
    window.clearTimeout(timer);
    if (!paused) {
      timer = window.setTimeout(reload, every);
    }
  }

  function reload() {
    if (document.hidden) {
      schedule();
      return;
    }
    window.fetch(window.location.href, { credentials: "same-origin", headers: { "X-Requested-With": "live" } })
      .then(function (r) {
        if (r.redirected || !r.ok) {
          throw new Error("refresh answered " + r.status);
        }
        return r.text();
      })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById("live");
        if (fresh && !paused) {
          live.innerHTML = fresh.innerHTML;
        }
        body.classList.remove("stale");
      })
      .catch(function () {
        body.classList.add("stale");
      })
      .then(schedule);
  }

  button.hidden = false;
  button.addEventListener("click", function () {
    paused = !paused;
    try { window.localStorage.setItem(key, paused ? "1" : "0"); } catch (e) { /* private mode */ }
    label();
    schedule();
  });
  label();
  schedule();
})();
