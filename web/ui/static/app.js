// The console's few behaviours beside htmx: the CSRF token on every htmx request, the live
// regions (they follow the console's Server-Sent Events and ask for their fragment again when
// one says something changed; a poll stands in while no stream is held), countdowns to due
// times, and the editor's jump to a problem's line. No inline scripts (the pages'
// Content-Security-Policy forbids them).
(function () {
  "use strict";
  var meta = document.querySelector('meta[name="csrf-token"]');
  document.addEventListener("htmx:configRequest", function (e) {
    if (meta) { e.detail.headers["X-CSRF-Token"] = meta.content; }
  });

  // ---- live regions ----
  // An element with data-follow (an event stream of the console) and data-refresh (the URL of
  // its fragment) is followed: each event of the stream asks for the fragment again (?via=sse),
  // one request at a time (events that arrive meanwhile make one more), and the answer replaces
  // the element (204: nothing changed). Without the stream (not open yet, broken, or refused)
  // the fragment is asked for every data-poll ms (?via=poll); while the stream is open, every
  // data-slow-poll ms (when set) all the same, for what no event reports (a role that started,
  // a delay-queue entry). An answer without data-follow (a terminal execution) ends it.
  var live = null; // {url, es, timer, busy, again, open}

  function liveEl() { return document.querySelector("[data-follow]"); }

  function refresh(via) {
    if (!live) { return; }
    if (live.busy) { live.again = live.again || via; return; }
    var el = liveEl();
    if (!el || !el.getAttribute("data-refresh")) { return; }
    live.busy = true;
    var url = el.getAttribute("data-refresh");
    url += (url.indexOf("?") < 0 ? "?" : "&") + "via=" + via;
    var done = function () {
      live.busy = false;
      follow();
      if (live && live.again) { var v = live.again; live.again = null; refresh(v); }
    };
    htmx.ajax("GET", url, {source: el, target: el, swap: "outerHTML"}).then(done, done);
  }

  function schedule() {
    if (!live) { return; }
    clearInterval(live.timer);
    var el = liveEl();
    var every = el ? parseInt(el.getAttribute(live.open ? "data-slow-poll" : "data-poll") || "0", 10) : 0;
    if (every > 0) { live.timer = setInterval(function () { refresh("poll"); }, every); }
  }

  function mark() {
    var el = liveEl();
    if (el) { el.setAttribute("data-live", live && live.open ? "open" : "polling"); }
  }

  function stop() {
    if (!live) { return; }
    clearInterval(live.timer);
    if (live.es) { live.es.close(); }
    live = null;
  }

  // follow starts (or keeps, or ends) following the page's live element.
  function follow() {
    var el = liveEl();
    var url = el && el.getAttribute("data-follow");
    if (live && (!url || url.split("?")[0] !== live.url.split("?")[0])) { stop(); }
    if (!url) { return; }
    if (live) { mark(); return; }
    live = {url: url, es: null, timer: null, busy: false, again: null, open: false};
    schedule();
    if (typeof EventSource === "function") {
      var es = new EventSource(url);
      live.es = es;
      var me = live;
      var changed = function () { if (live === me) { refresh("sse"); } };
      es.onopen = function () { if (live === me) { me.open = true; schedule(); mark(); } };
      es.onerror = function () {
        // The browser reconnects on its own (a closed stream it does not: the console refused
        // it); meanwhile the poll stands in.
        if (live === me && me.open) { me.open = false; schedule(); mark(); }
      };
      ["snapshot", "timeline", "truncated", "status", "resync", "ready"].forEach(function (name) {
        es.addEventListener(name, changed);
      });
      es.addEventListener("end", function (e) {
        var reason = "";
        try { reason = JSON.parse(e.data).reason; } catch (err) { reason = ""; }
        if (live !== me) { return; }
        if (reason === "draining") { me.open = false; schedule(); mark(); return; } // reconnects elsewhere
        es.close();
        me.open = false;
        refresh("sse");
      });
    }
    mark();
  }
  document.addEventListener("DOMContentLoaded", follow);

  // A live refresh that fails for now (the console answers 503 with X-Plaita-Stale, or does not
  // answer) keeps what the page shows under a banner that says since when; the refreshes go on,
  // and the first that succeeds takes the banner away.
  // Any refreshed region may say what it shows (data-stale: "this execution", "the list", "the
  // cluster's state"); the execution page's live region, the list's rows and the cluster page's
  // panel do, each refreshed by its own means (the stream and poll above, htmx's every 5s).
  // The request's element or its target: once a region is swapped out, htmx reports the
  // request on an ancestor (the element is gone), the target still names the region.
  function watched(e) {
    var d = e.detail || {};
    var el = liveEl() || document.getElementById("live");
    var all = [d.elt, d.target];
    for (var i = 0; i < all.length; i++) {
      var x = all[i];
      if (!x) { continue; }
      if (el && x === el) { return el; }
      if (x.hasAttribute && x.hasAttribute("data-stale")) { return x; }
    }
    return null;
  }
  function staleBanner(el, why) {
    var b = document.getElementById("stale-banner");
    if (!b) {
      b = document.createElement("p");
      b.id = "stale-banner";
      b.className = "waiting";
      b.setAttribute("role", "status");
      b.setAttribute("data-stale-since", new Date().toISOString());
      el.parentNode.insertBefore(b, el);
    }
    var since = b.getAttribute("data-stale-since").replace(/\.\d+Z$/, "Z").replace("T", " ");
    b.textContent = "Stale since " + since + ": the console cannot read " + (el.getAttribute("data-stale") || "this page") +
      " now (" + why + "). What is shown is as it was then; retrying.";
    var note = document.getElementById("live-note");
    if (note) { note.textContent = "(stale)"; }
  }
  function fresh() {
    var b = document.getElementById("stale-banner");
    if (b) { b.remove(); }
  }
  // A failed request settles no promise of htmx.ajax: the refresh is marked done here, so the
  // next poll or event tries again.
  function failed() {
    if (live) { live.busy = false; live.again = null; schedule(); }
  }
  document.addEventListener("htmx:responseError", function (e) {
    var el = watched(e);
    if (el) {
      staleBanner(el, e.detail.xhr.getResponseHeader("X-Plaita-Stale") || "HTTP " + e.detail.xhr.status);
      failed();
    }
  });
  document.addEventListener("htmx:sendError", function (e) {
    var el = watched(e);
    if (el) { staleBanner(el, "the console does not answer"); failed(); }
  });
  document.addEventListener("htmx:afterRequest", function (e) {
    if (watched(e) && e.detail.successful) { fresh(); }
  });
  // A button's answer says the execution changed (HX-Trigger: execution-changed).
  document.addEventListener("execution-changed", function () { refresh("action"); });

  // ---- countdowns ----
  function fmt(ms) {
    var out = span(ms);
    return ms < 0 ? out + " ago" : "in " + out;
  }
  // One clock for every relative time of a page: a due time (data-due: "in 4m 2s", "7s ago")
  // and an elapsed one (data-since: "4m 2s"), in the words the server writes them in.
  function span(ms) {
    var s = Math.round(Math.abs(ms) / 1000);
    var d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60), r = s % 60;
    return d ? d + "d " + h + "h" : h ? h + "h " + m + "m" : m ? m + "m " + r + "s" : r + "s";
  }
  function tick() {
    var now = Date.now();
    document.querySelectorAll("[data-due]").forEach(function (el) {
      var due = Date.parse(el.getAttribute("data-due"));
      if (!isNaN(due)) { el.textContent = fmt(due - now); }
    });
    document.querySelectorAll("[data-since]").forEach(function (el) {
      var since = Date.parse(el.getAttribute("data-since"));
      if (!isNaN(since)) { el.textContent = span(now - since); }
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

  // ---- the graph's zoom ----
  // A .graph[data-zoom] gets buttons (only with JavaScript: without it the picture fits the
  // page as before): zoom in and out by steps of 1.25, fit (the width of the page), actual size.
  // The scale outlives a live refresh of the page, which draws the graph anew.
  var zoom = 0; // 0: fit; else the scale of the picture's own size
  function scaleGraph(box) {
    var svg = box.querySelector("svg");
    if (!svg) { return; }
    var w = parseFloat(svg.getAttribute("width")) || 0;
    if (zoom === 0 || !w) {
      svg.style.maxWidth = ""; svg.style.width = "";
    } else {
      svg.style.maxWidth = "none"; svg.style.width = Math.round(w * zoom) + "px";
    }
    box.setAttribute("data-scale", zoom === 0 ? "fit" : String(Math.round(zoom * 100)));
    var label = box.previousElementSibling && box.previousElementSibling.querySelector("[data-zoom-level]");
    if (label) { label.textContent = zoom === 0 ? "fit" : Math.round(zoom * 100) + "%"; }
  }
  function zoomControls() {
    document.querySelectorAll(".graph[data-zoom]").forEach(function (box) {
      if (box.previousElementSibling && box.previousElementSibling.classList.contains("zoom")) { scaleGraph(box); return; }
      var bar = document.createElement("div");
      bar.className = "zoom actions";
      bar.setAttribute("role", "toolbar");
      bar.setAttribute("aria-label", "Zoom the graph");
      [["zoom-out", "Zoom out", "−"], ["zoom-fit", "Fit to the page", "Fit"], ["zoom-actual", "100%: the actual size", "100%"], ["zoom-in", "Zoom in", "+"]].forEach(function (b) {
        var el = document.createElement("button");
        el.type = "button"; el.className = "secondary"; el.id = b[0];
        el.setAttribute("aria-label", b[1]); el.textContent = b[2];
        bar.appendChild(el);
      });
      var level = document.createElement("span");
      level.className = "muted"; level.setAttribute("data-zoom-level", ""); level.setAttribute("aria-live", "polite");
      bar.appendChild(level);
      box.parentNode.insertBefore(bar, box);
      scaleGraph(box);
    });
  }
  document.addEventListener("click", function (e) {
    var b = e.target.closest(".zoom button");
    if (!b) { return; }
    var box = b.parentNode.nextElementSibling, svg = box && box.querySelector("svg");
    if (!svg) { return; }
    var w = parseFloat(svg.getAttribute("width")) || 1;
    var now = zoom === 0 ? Math.min(1, svg.getBoundingClientRect().width / w) : zoom;
    if (b.id === "zoom-in") { zoom = Math.min(4, now * 1.25); }
    if (b.id === "zoom-out") { zoom = Math.max(0.1, now / 1.25); }
    if (b.id === "zoom-fit") { zoom = 0; }
    if (b.id === "zoom-actual") { zoom = 1; }
    scaleGraph(box);
  });
  document.addEventListener("DOMContentLoaded", zoomControls);
  document.addEventListener("htmx:afterSettle", zoomControls);

  // ---- saved views ----
  // A filter form with data-views keeps named filters in the browser (localStorage, per
  // page): each a link to the page with its query, saved from the query the page has now, and
  // removable. Without JavaScript (or storage) there are none; the filter itself works as before.
  function viewsKey(form) { return "plaita.views." + form.getAttribute("data-views"); }
  function readViews(form) {
    try { return JSON.parse(localStorage.getItem(viewsKey(form)) || "[]"); } catch (e) { return []; }
  }
  function drawViews(form) {
    var box = document.getElementById("saved-views");
    if (!box) {
      box = document.createElement("div");
      box.id = "saved-views"; box.className = "saved-views";
      box.setAttribute("role", "region"); box.setAttribute("aria-label", "Saved views");
      form.parentNode.insertBefore(box, form.nextSibling);
    }
    box.textContent = "";
    var title = document.createElement("span");
    title.className = "muted"; title.textContent = "Saved views:";
    box.appendChild(title);
    readViews(form).forEach(function (v, i) {
      var a = document.createElement("a");
      a.href = form.getAttribute("action") + (v.query ? "?" + v.query : "");
      a.textContent = v.name; a.className = "view";
      var del = document.createElement("button");
      del.type = "button"; del.className = "secondary"; del.textContent = "×";
      del.setAttribute("aria-label", "Remove the saved view " + v.name);
      del.setAttribute("data-remove-view", String(i));
      box.appendChild(a); box.appendChild(del);
    });
    var name = document.createElement("input");
    name.type = "text"; name.id = "view-name"; name.maxLength = 60; name.placeholder = "name of this view";
    name.setAttribute("aria-label", "Name of this view");
    var save = document.createElement("button");
    save.type = "button"; save.className = "secondary"; save.id = "save-view"; save.textContent = "Save this view";
    box.appendChild(name); box.appendChild(save);
  }
  function views() {
    var form = document.querySelector("form[data-views]");
    if (!form || !window.localStorage) { return; }
    drawViews(form);
  }
  document.addEventListener("click", function (e) {
    var form = document.querySelector("form[data-views]");
    if (!form) { return; }
    var vs = readViews(form);
    if (e.target.id === "save-view") {
      var name = (document.getElementById("view-name").value || "").trim();
      if (!name) { document.getElementById("view-name").focus(); return; }
      // The page's query less its place in the list: a view is a filter, not a page.
      var q = new URLSearchParams(location.search);
      ["cursor", "deleted", "via", "fragment"].forEach(function (k) { q.delete(k); });
      vs = vs.filter(function (v) { return v.name !== name; });
      vs.push({name: name, query: q.toString()});
    } else if (e.target.hasAttribute("data-remove-view")) {
      vs.splice(parseInt(e.target.getAttribute("data-remove-view"), 10), 1);
    } else {
      return;
    }
    try { localStorage.setItem(viewsKey(form), JSON.stringify(vs)); } catch (err) { return; }
    drawViews(form);
  });
  document.addEventListener("DOMContentLoaded", views);

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
