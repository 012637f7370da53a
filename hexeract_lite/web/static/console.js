// hexeract_lite console: refresh the page's live part every few seconds, without a
// framework. Skipped while the tab is hidden or while a field in it has the focus; an
// open traceback stays open.
(function () {
  "use strict";
  var live = document.getElementById("live");
  if (!live) return;
  var seconds = parseInt(live.getAttribute("data-refresh"), 10) || 5;
  function refresh() {
    var focused = document.activeElement;
    if (document.hidden || (focused && live.contains(focused) && focused.tagName === "INPUT")) return;
    fetch(window.location.href, { headers: { "X-Hexeract-Fragment": "1" }, credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (html === null) return;
        var open = Array.prototype.map.call(live.querySelectorAll("details[open][id]"), function (d) { return d.id; });
        live.innerHTML = html;
        open.forEach(function (id) { var d = document.getElementById(id); if (d) d.open = true; });
        live.setAttribute("data-refreshed", String(Date.now()));
      })
      .catch(function () { /* the server is away: try again at the next tick */ });
  }
  window.setInterval(refresh, seconds * 1000);
})();
