/* "Discover now" in the upstream servers' admin: while a discovery is queued or running, ask how it stands every
   few seconds and show it. Once it ended, offer to reload: the page's other fields are from before it.
   A file, not an inline script, so that a Content-Security-Policy may forbid inline scripts. */
"use strict";

(function () {
  function watch(element) {
    var every = Number(element.dataset.pollMs) || 2000;

    function show(status) {
      element.textContent = status.label;
      element.dataset.state = status.state;
      element.dataset.active = status.active ? "true" : "false";
      if (status.active) {
        window.setTimeout(ask, every);
        return;
      }
      var reload = document.createElement("a");
      reload.href = window.location.href;
      reload.textContent = element.dataset.reloadLabel;
      element.append(" ", reload);
    }

    function ask() {
      window
        .fetch(element.dataset.statusUrl, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (answer) {
          if (!answer.ok) {
            throw new Error("status " + answer.status);
          }
          return answer.json();
        })
        .then(show)
        .catch(function () {
          // Logged out, or the server is gone: the page keeps what it shows, and stops asking.
        });
    }

    window.setTimeout(ask, every);
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll(".mcp-discovery[data-active='true']").forEach(watch);
  });
})();
