/* agentcore Studio — the little that htmx cannot do: keys, scroll pinning, tabs, status. */
(function () {
  "use strict";

  function $(sel, root) { return (root || document).querySelector(sel); }

  // Composer: Enter sends, Shift+Enter inserts a newline (IME composition is left alone).
  document.addEventListener("keydown", function (e) {
    var ta = e.target;
    if (!ta || ta.id !== "prompt" || e.key !== "Enter" || e.shiftKey || e.isComposing) return;
    e.preventDefault();
    var send = $("#send-button");
    if (!ta.value.trim() || !send || send.disabled) return;
    ta.form.requestSubmit();
  });

  // Grow the textarea with its content (up to the CSS max-height).
  document.addEventListener("input", function (e) {
    if (e.target && e.target.id === "prompt") {
      e.target.style.height = "auto";
      e.target.style.height = e.target.scrollHeight + "px";
    }
  });

  // The server accepted a command: clear the composer.
  document.body && document.body.addEventListener("studio:accepted", function (e) {
    var form = e.target && e.target.closest ? e.target.closest("form") : null;
    if (form && form.id === "composer") {
      var ta = $("#prompt");
      ta.value = "";
      ta.style.height = "";
    }
  });

  // Keep the conversation pinned to the bottom while it streams, unless the reader scrolled up.
  var pinned = true;
  function scroller() { return $("#conversation-scroll"); }
  function nearBottom(el) { return el.scrollHeight - el.scrollTop - el.clientHeight < 80; }
  document.addEventListener("scroll", function (e) {
    if (e.target === scroller()) pinned = nearBottom(e.target);
  }, true);
  document.addEventListener("htmx:wsAfterMessage", function () {
    var el = scroller();
    if (el && pinned) el.scrollTop = el.scrollHeight;
  });

  // Live connection indicator.
  function conn(state) {
    var el = $("#conn-state");
    if (!el) return;
    el.classList.toggle("on", state === "on");
    el.classList.toggle("off", state === "off");
    el.textContent = state === "on" ? "live" : "reconnecting";
    document.body.dataset.ws = state;
  }
  document.addEventListener("htmx:wsOpen", function () { conn("on"); });
  document.addEventListener("htmx:wsClose", function () { conn("off"); });

  // Trace tabs.
  document.addEventListener("click", function (e) {
    var tab = e.target.closest ? e.target.closest(".tab[data-tab]") : null;
    if (!tab) return;
    document.querySelectorAll(".tab[data-tab]").forEach(function (t) {
      var on = t === tab;
      t.classList.toggle("active", on);
      t.setAttribute("aria-selected", on ? "true" : "false");
    });
    document.querySelectorAll(".tab-panel[data-panel]").forEach(function (p) {
      p.hidden = p.dataset.panel !== tab.dataset.tab;
    });
  });

  document.addEventListener("DOMContentLoaded", function () {
    var el = scroller();
    if (el) el.scrollTop = el.scrollHeight;
    var ta = $("#prompt");
    if (ta && !$("#pending .review")) ta.focus();
  });
})();
