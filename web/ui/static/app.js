// The console's few behaviours beside htmx: the CSRF token on every htmx request, countdowns
// to due times, and the editor's jump to a problem's line. No inline scripts (the pages'
// Content-Security-Policy forbids them).
(function () {
  "use strict";
  var meta = document.querySelector('meta[name="csrf-token"]');
  document.addEventListener("htmx:configRequest", function (e) {
    if (meta) { e.detail.headers["X-CSRF-Token"] = meta.content; }
  });

  function fmt(ms) {
    var past = ms < 0, s = Math.round(Math.abs(ms) / 1000);
    var d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60), r = s % 60;
    var out = d ? d + "d " + h + "h" : h ? h + "h " + m + "m" : m ? m + "m " + r + "s" : r + "s";
    return past ? out + " ago" : "in " + out;
  }
  function tick() {
    var now = Date.now();
    document.querySelectorAll("[data-due]").forEach(function (el) {
      var due = Date.parse(el.getAttribute("data-due"));
      if (!isNaN(due)) { el.textContent = fmt(due - now); }
    });
  }
  setInterval(tick, 1000);
  // After a check, the annotated definition shows its first problem.
  document.addEventListener("htmx:afterSettle", function (e) {
    var box = e.target.querySelector && e.target.querySelector(".annotated");
    var bad = box && box.querySelector(".bad");
    if (bad) { box.scrollTop = Math.max(0, bad.offsetTop - box.offsetTop - 40); }
  });
  document.addEventListener("htmx:afterSettle", tick);
  document.addEventListener("DOMContentLoaded", tick);

  // A problem's "go to line" link puts the editor's caret on that line.
  document.addEventListener("click", function (e) {
    var a = e.target.closest("[data-goto-line]");
    if (!a) { return; }
    var ta = document.getElementById(a.getAttribute("data-editor"));
    if (!ta) { return; }
    e.preventDefault();
    var line = parseInt(a.getAttribute("data-goto-line"), 10), pos = 0, lines = ta.value.split("\n");
    for (var i = 0; i < line - 1 && i < lines.length; i++) { pos += lines[i].length + 1; }
    ta.focus();
    ta.setSelectionRange(pos, pos + (lines[line - 1] || "").length);
  });
})();
