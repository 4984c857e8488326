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

  // Optimistic send: the person's message and a pending state appear at once, before the
  // server answers. The host's next full push replaces #conversation and #run-controls with
  // what the store holds (the real turn), which removes this placeholder: reconciled. A
  // refused or failed request takes the placeholder away and gives the text back.
  function isComposer(e) { return e.detail && e.detail.elt && e.detail.elt.id === "composer"; }
  function dropOptimistic() {
    var node = $("#optimistic-turn");
    if (node) node.remove();
    document.querySelectorAll(".conversation-empty[data-hidden-by-send]").forEach(function (el) {
      el.hidden = false;
      delete el.dataset.hiddenBySend;
    });
  }
  document.addEventListener("htmx:beforeRequest", function (e) {
    if (!isComposer(e)) return;
    var ta = $("#prompt"), conversation = $("#conversation");
    var text = ta ? ta.value : "";
    if (!text.trim() || !conversation) return;
    dropOptimistic();
    var turn = document.createElement("section");
    turn.className = "turn live optimistic";
    turn.id = "optimistic-turn";
    turn.setAttribute("aria-busy", "true");
    var msg = document.createElement("div");
    msg.className = "user-msg";
    var bubble = document.createElement("div");
    bubble.className = "bubble";
    bubble.textContent = text;
    msg.appendChild(bubble);
    var typing = document.createElement("div");
    typing.className = "typing";
    typing.setAttribute("aria-live", "polite");
    typing.innerHTML = "<span></span><span></span><span></span><em>Sending…</em>";
    turn.appendChild(msg);
    turn.appendChild(typing);
    conversation.querySelectorAll(".conversation-empty").forEach(function (el) {
      el.hidden = true;
      el.dataset.hiddenBySend = "1";
    });
    conversation.appendChild(turn);
    e.detail.elt.dataset.sentText = text;
    ta.value = "";
    ta.style.height = "";
    var send = $("#send-button");
    if (send) { send.disabled = true; send.classList.add("sending"); }
    var el = scroller();
    if (el) { pinned = true; el.scrollTop = el.scrollHeight; }
  });
  document.addEventListener("htmx:afterRequest", function (e) {
    if (!isComposer(e)) return;
    var form = e.detail.elt;
    var refused = !e.detail.successful || (e.detail.xhr && e.detail.xhr.responseText.trim() !== "");
    if (refused) {
      dropOptimistic();
      var ta = $("#prompt");
      if (ta && !ta.value && form.dataset.sentText) ta.value = form.dataset.sentText;
      var send = $("#send-button");
      if (send && send.classList.contains("sending")) { send.disabled = false; send.classList.remove("sending"); }
    }
    delete form.dataset.sentText;
  });

  // Approve & build: what comes next is build work, so the composer switches to Build at once
  // (the server stores the same preference, so a reload agrees). A refused decision puts the
  // previous mode back. Not done from the response: the review card the form lives in is
  // usually replaced by the host's push before the response arrives.
  document.addEventListener("submit", function (e) {
    var form = e.target;
    if (!form.classList || !form.classList.contains("review-form")) return;
    if (!e.submitter || e.submitter.value !== "approve") return;
    var current = document.querySelector("#composer input[name=agent]:checked");
    form.dataset.previousMode = current ? current.value : "";
    setMode("build");
  }, true);
  document.addEventListener("htmx:afterRequest", function (e) {
    var form = e.detail && e.detail.elt;
    if (!form || !form.classList || !form.classList.contains("review-form")) return;
    var refused = !e.detail.successful || (e.detail.xhr && e.detail.xhr.responseText.trim() !== "");
    if (refused && form.dataset.previousMode) setMode(form.dataset.previousMode);
  });
  function setMode(value) {
    var radio = document.querySelector('#composer input[name=agent][value="' + value + '"]');
    if (radio) radio.checked = true;
  }

  // Narrow screens: the Trace is a drawer over the conversation.
  function trace(open) {
    document.body.classList.toggle("trace-open", open);
    var toggle = $("#trace-toggle");
    if (toggle) toggle.setAttribute("aria-expanded", open ? "true" : "false");
  }
  document.addEventListener("click", function (e) {
    if (!e.target.closest) return;
    if (e.target.closest("#trace-toggle")) trace(!document.body.classList.contains("trace-open"));
    else if (e.target.closest("#trace-close")) trace(false);
  });
  document.addEventListener("keydown", function (e) {
    if (e.key === "Escape" && document.body.classList.contains("trace-open")) trace(false);
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
    var title = $("#session-title");  // the first prompt names the session: the tab follows
    if (title) document.title = title.textContent.trim() + " · agentcore Studio";
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
