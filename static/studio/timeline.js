/* agentcore Studio — the Timeline (SPEC W8): loads the region when its tab opens, places each
   row's bar on the time axis (the CSP allows no inline style, so bars are placed here from
   data-start / data-end and the axis's data-t0 / data-t1), grows open bars while a turn runs,
   zooms on one turn, opens a span's details, and moves between rows with the keyboard.
   Live pushes patch the rows (htmx out-of-band swaps); this only lays them out again. */
(function () {
  "use strict";

  var selected = null;   // the span id whose details are open
  var zoom = "";         // the request id of the turn zoomed on ("" = the whole window)

  function $(sel, root) { return (root || document).querySelector(sel); }
  function panel() { return $(".timeline-panel"); }
  function num(v) { return v === undefined || v === "" ? null : Number(v); }

  // The server's "now" when it rendered this axis, moved on by the time since it arrived.
  function serverNow(axis) {
    var now = num(axis.dataset.now);
    if (!axis.studioSeenAt) axis.studioSeenAt = Date.now();
    return now === null ? Date.now() : now + (Date.now() - axis.studioSeenAt);
  }

  // --- placing bars ----------------------------------------------------------------------
  function place(list, axis) {
    if (!list || !axis) return;
    var t0 = num(axis.dataset.t0), t1 = num(axis.dataset.t1);
    var live = axis.dataset.live === "1", now = serverNow(axis);
    var rows = list.querySelectorAll(".tl-row");
    var turn = list.id === "timeline-rows" ? zoom : "";
    if (turn) {
      var first = null, last = null;
      rows.forEach(function (row) {
        if (row.dataset.turn !== turn) return;
        var s = num(row.dataset.start), e = num(row.dataset.end);
        if (s !== null) first = first === null ? s : Math.min(first, s);
        var end = e === null ? (s === null ? null : now) : e;
        if (end !== null) last = last === null ? end : Math.max(last, end);
      });
      if (first !== null) { t0 = first; t1 = last; }
    } else if (live && t1 !== null) {
      t1 = Math.max(t1, now);
    }
    if (t0 === null || t1 === null) return;
    var total = Math.max(1, t1 - t0);
    rows.forEach(function (row) {
      row.hidden = !!turn && row.dataset.turn !== turn;
      var bar = row.querySelector(".tl-bar");
      var s = num(row.dataset.start), e = num(row.dataset.end);
      if (!bar) return;
      if (s === null) { bar.hidden = true; return; }
      bar.hidden = false;
      var end = e === null ? now : e;
      var left = Math.min(100, Math.max(0, (s - t0) / total * 100));
      var width = Math.max(0, Math.min(100 - left, (end - s) / total * 100));
      bar.style.left = left.toFixed(3) + "%";
      bar.style.width = "max(2px, " + width.toFixed(3) + "%)";
      if (e === null) {
        var dur = row.querySelector(".tl-dur");
        if (dur) dur.textContent = format(end - s);
      }
    });
    axis.querySelectorAll(".tl-tick").forEach(function (tick) {
      var at = num(tick.dataset.at);
      var left = (at - t0) / total * 100;
      tick.hidden = turn !== "" || left > 100;
      tick.style.left = left.toFixed(3) + "%";
    });
    var head = axis.querySelector(".tl-axis-start");
    if (head) head.hidden = turn !== "";
  }

  // The one duration format of every page (studio/timefmt.py: duration).
  function format(ms) {
    if (ms < 1000) return Math.round(ms) + " ms";
    if (ms < 60000) return (ms / 1000).toFixed(1) + " s";
    if (ms < 3600000) return Math.floor(ms / 60000) + " min " + Math.floor(ms % 60000 / 1000) + " s";
    return Math.floor(ms / 3600000) + " h " + Math.floor(ms % 3600000 / 60000) + " min";
  }

  function layout() {
    place($("#timeline-rows"), $("#timeline-axis"));
    place($("#timeline-turn-rows"), $("#timeline-turn-axis"));
    var row = selected ? document.querySelector('.tl-row[data-span="' + cssEscape(selected) + '"]') : null;
    document.querySelectorAll(".tl-row.selected").forEach(function (r) { if (r !== row) r.classList.remove("selected"); });
    if (row) row.classList.add("selected");
    roving();
    var select = $("#timeline-head .tl-scope-select");
    if (select && !$("#timeline-turn") && select.value !== zoom) select.value = zoom;
  }
  function cssEscape(text) { return window.CSS && CSS.escape ? CSS.escape(text) : text.replace(/"/g, '\\"'); }

  // --- loading -----------------------------------------------------------------------------
  function fetchHtml(url) {
    return fetch(url, {credentials: "same-origin"}).then(function (r) {
      return r.text().then(function (text) { if (!r.ok) throw new Error(text || String(r.status)); return text; });
    });
  }
  function load() {
    var p = panel();
    if (!p) return Promise.resolve();
    return fetchHtml(p.dataset.timelineUrl).then(function (html) {
      var region = $("#tab-timeline");
      if (region) region.outerHTML = html;
      localTimes(p);
      layout();
    }).catch(function (err) {
      var region = $("#tab-timeline");
      if (region) region.innerHTML = '<p class="form-error" role="alert"></p>';
      var note = region && region.querySelector(".form-error");
      if (note) note.textContent = "The timeline could not be loaded: " + err.message;
    });
  }
  function loaded() { var r = $("#tab-timeline"); return !!r && r.dataset.loaded === "1"; }

  function openTurn(requestId) {
    var p = panel(), slot = $("#timeline-turn-slot");
    if (!p || !slot) return;
    fetchHtml(p.dataset.timelineUrl + "?turn=" + encodeURIComponent(requestId)).then(function (html) {
      slot.innerHTML = html;
      var region = $("#tab-timeline");
      if (region) region.hidden = true;
      localTimes(slot);
      layout();
      var first = slot.querySelector(".tl-name");
      if (first) first.focus();
    });
  }
  function closeTurn() {
    var slot = $("#timeline-turn-slot"), region = $("#tab-timeline");
    if (slot) slot.innerHTML = "";
    if (region) region.hidden = false;
  }

  function showSpan(row) {
    var p = panel(), box = $("#timeline-details");
    if (!p || !box || !row) return;
    selected = row.dataset.span;
    layout();
    fetchHtml(p.dataset.spanUrl + "?span=" + encodeURIComponent(selected)).then(function (html) {
      box.innerHTML = html;
      localTimes(box);
    }).catch(function (err) {
      box.innerHTML = '<p class="form-error" role="alert"></p>';
      box.firstChild.textContent = "The details could not be loaded: " + err.message;
    });
  }

  // --- the tab, the scope, clicks ----------------------------------------------------------
  document.addEventListener("click", function (e) {
    if (!e.target.closest) return;
    var tab = e.target.closest(".tab[data-tab]");
    if (tab) {
      var on = tab.dataset.tab === "timeline";
      document.body.classList.toggle("timeline-wide", on);
      if (on && !loaded()) load(); else if (on) layout();
      return;
    }
    var name = e.target.closest(".tl-name");
    if (name) { showSpan(name.closest(".tl-row")); return; }
    if (e.target.closest(".tl-detail-close")) {
      selected = null;
      var box = $("#timeline-details");
      if (box) box.innerHTML = "";
      layout();
    }
  });
  document.addEventListener("change", function (e) {
    var select = e.target;
    if (!select.classList || !select.classList.contains("tl-scope-select")) return;
    var option = select.selectedOptions[0];
    if (!select.value) { zoom = ""; closeTurn(); layout(); return; }
    if (option && option.dataset.shown === "1") { zoom = select.value; closeTurn(); layout(); return; }
    zoom = "";
    openTurn(select.value);
  });

  // --- the keyboard: one row in the tab order, arrows move between rows ---------------------
  function visibleNames(list) {
    return Array.prototype.filter.call(list.querySelectorAll(".tl-row"), function (r) { return !r.hidden; })
      .map(function (r) { return r.querySelector(".tl-name"); });
  }
  function roving() {
    ["#timeline-rows", "#timeline-turn-rows"].forEach(function (sel) {
      var list = $(sel);
      if (!list) return;
      var names = visibleNames(list);
      var current = names.filter(function (n) { return n.tabIndex === 0; });
      if (current.length === 1 && document.contains(current[0])) return;
      names.forEach(function (n, i) { n.tabIndex = i === 0 ? 0 : -1; });
    });
  }
  document.addEventListener("keydown", function (e) {
    var name = e.target.closest ? e.target.closest(".tl-name") : null;
    if (!name) return;
    var list = name.closest(".tl-rows");
    var names = visibleNames(list), at = names.indexOf(name), next = null;
    if (e.key === "ArrowDown") next = names[Math.min(names.length - 1, at + 1)];
    else if (e.key === "ArrowUp") next = names[Math.max(0, at - 1)];
    else if (e.key === "Home") next = names[0];
    else if (e.key === "End") next = names[names.length - 1];
    else if (e.key === "PageDown") next = names[Math.min(names.length - 1, at + 20)];
    else if (e.key === "PageUp") next = names[Math.max(0, at - 20)];
    if (!next) return;
    e.preventDefault();
    names.forEach(function (n) { n.tabIndex = -1; });
    next.tabIndex = 0;
    next.focus();
  });

  // --- local times with the UTC time in a tooltip (studio/timefmt.py: local_time_html) -------
  function localTimes(root) {
    (root || document).querySelectorAll("time[data-local-time]:not([data-shown])").forEach(function (el) {
      var when = new Date(Number(el.dataset.localTime)), style = el.dataset.style || "datetime";
      if (style === "relative") el.title = when.toLocaleString() + " (" + el.title + ")";
      else el.textContent = style === "time" ? when.toLocaleTimeString() :
        style === "date" ? when.toLocaleDateString() : when.toLocaleString();
      el.dataset.shown = "1";
    });
  }
  // Times the Trace tabs render in UTC (wake times, a script's start): the UTC time on hover.
  function utcTitles(root) {
    (root || document).querySelectorAll("time[data-ms]:not([title])").forEach(function (el) {
      el.title = new Date(Number(el.dataset.ms)).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
    });
  }

  // --- live pushes ----------------------------------------------------------------------------
  var resyncMark = null;
  document.addEventListener("htmx:wsAfterMessage", function () {
    localTimes();
    utcTitles();
    var mark = $("#timeline-resync");
    if (mark && resyncMark && mark !== resyncMark && loaded()) load();  // a full re-render: catch up
    resyncMark = mark;
    if ($("#timeline-axis")) layout();
  });
  setInterval(function () {
    var axis = $("#timeline-axis");
    if (axis && axis.dataset.live === "1" && !panel().hidden) layout();
  }, 500);

  document.addEventListener("DOMContentLoaded", function () {
    resyncMark = $("#timeline-resync");
    localTimes();
    utcTitles();
  });
})();
