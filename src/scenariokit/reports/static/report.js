// scenariokit reports: the log filter, and the token a served report asks for (docs/reports.md).
// No framework, no build step, nothing loaded from elsewhere.
(function () {
  "use strict";
  var TOKEN_KEY = "scenariokit.token";

  // The filter box narrows the log lines shown as one types; on a served page, Enter asks the
  // server for the matching lines of the whole log (the page only holds one page of it).
  function wireLogFilter() {
    var form = document.getElementById("log-filter");
    var box = document.getElementById("log-q");
    var log = document.getElementById("log");
    var count = document.getElementById("log-count");
    if (!form || !box) return;
    if (form.hasAttribute("data-local")) {
      form.addEventListener("submit", function (event) { event.preventDefault(); });
    }
    if (!log) return;
    var lines = Array.prototype.slice.call(log.querySelectorAll("li"));
    function narrow() {
      var needle = box.value.toLowerCase();
      var shown = 0;
      lines.forEach(function (line) {
        var match = !needle || line.textContent.toLowerCase().indexOf(needle) !== -1;
        line.hidden = !match;
        if (match) shown += 1;
      });
      if (count) count.textContent = needle ? shown + " of " + lines.length + " lines shown" : "";
    }
    box.addEventListener("input", narrow);
    narrow();
  }

  // A served report with tokens set answers 401 with a form and no data. The token entered (or kept
  // in sessionStorage from an earlier page of this tab) is sent as a bearer token for this same URL,
  // and the page it answers replaces this one.
  function askForToken(form) {
    var error = document.getElementById("token-error");
    function load(token) {
      return fetch(window.location.href, {
        headers: { Authorization: "Bearer " + token },
        cache: "no-store",
        credentials: "omit",
      }).then(function (response) {
        if (response.status === 401) return false;
        return response.text().then(function (html) {
          var fresh = new DOMParser().parseFromString(html, "text/html");
          document.title = fresh.title;
          document.body.replaceWith(document.adoptNode(fresh.body));
          wirePage();
          return true;
        });
      });
    }
    function refused() {
      sessionStorage.removeItem(TOKEN_KEY);
      if (error) error.hidden = false;
    }
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var token = form.elements.token.value.trim();
      if (!token) return;
      load(token).then(function (ok) {
        if (ok) sessionStorage.setItem(TOKEN_KEY, token);
        else refused();
      }, refused);
    });
    var kept = sessionStorage.getItem(TOKEN_KEY);
    if (kept) {
      load(kept).then(function (ok) { if (!ok) refused(); }, refused);
    }
  }

  // A run still in progress is read again every few seconds (a served page; with tokens, the
  // reload goes through the kept token again).
  function refreshWhileRunning() {
    var running = document.querySelector("[data-refresh]");
    if (!running) return;
    var seconds = Number(running.getAttribute("data-refresh")) || 3;
    setTimeout(function () { window.location.reload(); }, seconds * 1000);
  }

  function wirePage() {
    wireLogFilter();
    refreshWhileRunning();
  }

  function start() {
    var form = document.getElementById("token-form");
    if (form) askForToken(form);
    else wirePage();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
