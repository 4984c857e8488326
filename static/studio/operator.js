/* agentcore Studio — "waiting for you" (SPEC W12): while a run waits for a plan review or an
   answer, the tab's title and favicon say so (on the session page, and on the sessions list
   for each waiting session, whose pills update live over the list's socket), and — if the
   person turned notifications on — the browser notifies once when a run starts waiting. */
(function () {
  "use strict";

  var PREFIX = /^⏸ (\(\d+\) )?Waiting for you · /;
  var wasWaiting = null;

  function $(sel) { return document.querySelector(sel); }
  function icon() { return $('link[rel="icon"]'); }

  function waitingCount() {
    var status = $("#session-status");
    if (status) return status.querySelector(".pill-waiting") ? 1 : 0;
    return document.querySelectorAll(".list-pill .pill-waiting").length;
  }
  function notifyOn() {
    return "Notification" in window && Notification.permission === "granted" &&
      localStorage.getItem("studio.notify") === "1";
  }

  function update() {
    var n = waitingCount();
    var clean = document.title.replace(PREFIX, "");
    var title = n ? "⏸ " + (n > 1 ? "(" + n + ") " : "") + "Waiting for you · " + clean : clean;
    if (document.title !== title) document.title = title;
    var link = icon();
    if (link) {
      if (!link.dataset.normal) link.dataset.normal = link.getAttribute("href");
      var want = n ? link.dataset.normal.replace("favicon.svg", "favicon-waiting.svg") : link.dataset.normal;
      if (link.getAttribute("href") !== want) link.setAttribute("href", want);
    }
    document.body.dataset.waiting = String(n);
    var count = $("#waiting-count");
    if (count) count.textContent = n ? n + " waiting for you" : "";
    if (wasWaiting !== null && n > wasWaiting && notifyOn()) {
      var what = $("#pending .review") ? "A plan waits for your review." :
        $("#pending .question-form") ? "The agent asked you a question." : "A session waits for you.";
      new Notification("Waiting for you", {body: what + " " + clean, tag: "studio-waiting-" + location.pathname});
    }
    wasWaiting = n;
  }

  function toggleButton() {
    var button = $("#notify-toggle");
    if (!button) return;
    if (!("Notification" in window) || Notification.permission === "denied") { button.hidden = true; return; }
    button.hidden = false;
    button.textContent = notifyOn() ? "Notifications on" : "Notify me";
    button.setAttribute("aria-pressed", notifyOn() ? "true" : "false");
  }
  document.addEventListener("click", function (e) {
    if (!e.target.closest || !e.target.closest("#notify-toggle")) return;
    if (notifyOn()) { localStorage.setItem("studio.notify", "0"); toggleButton(); return; }
    Notification.requestPermission().then(function (permission) {
      localStorage.setItem("studio.notify", permission === "granted" ? "1" : "0");
      toggleButton();
    });
  });

  document.addEventListener("htmx:wsAfterMessage", update);
  document.addEventListener("htmx:oobAfterSwap", update);
  document.addEventListener("DOMContentLoaded", function () { update(); toggleButton(); });
})();
