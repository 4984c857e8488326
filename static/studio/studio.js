/* agentcore Studio — the little that htmx cannot do: keys, scroll pinning, tabs, status,
   countdowns, open details that survive live pushes, and loading earlier messages. */
(function () {
  "use strict";

  function $(sel, root) { return (root || document).querySelector(sel); }

  // Composer: Enter sends, Shift+Enter inserts a newline (IME composition is left alone).
  document.addEventListener("keydown", function (e) {
    var ta = e.target;
    if (!ta || ta.id !== "prompt" || e.key !== "Enter" || e.shiftKey || e.isComposing) return;
    e.preventDefault();
    var send = $("#send-button");
    if ((!ta.value.trim() && !imageCount()) || !send || send.disabled) return;
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
  function imageCount() { var input = $("#image-input"); return input && input.files ? input.files.length : 0; }
  function busy() {
    var controls = $("#run-controls");
    return !!controls && controls.dataset.busy === "1";
  }
  function dropOptimistic() {
    var node = $("#optimistic-turn");
    if (node) node.remove();
    document.querySelectorAll(".conversation-empty[data-hidden-by-send]").forEach(function (el) {
      el.hidden = false;
      delete el.dataset.hiddenBySend;
    });
  }
  // How the composer sends: a text prompt over the page's socket (ws-send, answered by
  // #composer-error out of band with data-reply); with images, or while the socket is down, the
  // multipart POST to the form's action (answered by the response, as every other form).
  document.addEventListener("htmx:wsConfigSend", function (e) {
    if (!isComposer(e)) return;
    var form = e.detail.elt, submit = e.detail.triggeringEvent;
    var submitter = submit && submit.submitter;
    var values = {};
    if (submitter && submitter.name) values[submitter.name] = submitter.value;  // Steer / Queue
    Object.assign(e.detail.parameters, values);
    if (imageCount() === 0 && document.body.dataset.ws === "on") return;
    e.preventDefault();
    if (submit) submit.preventDefault();
    window.htmx.ajax("POST", form.getAttribute("action"), {
      source: form, target: "#composer-error", swap: "innerHTML", values: values,
    });
  });
  document.addEventListener("htmx:wsBeforeSend", function (e) { if (isComposer(e)) beginSend(e.detail.elt); });
  document.addEventListener("htmx:beforeRequest", function (e) { if (isComposer(e)) beginSend(e.detail.elt); });
  document.addEventListener("htmx:afterRequest", function (e) {
    if (!isComposer(e)) return;
    endSend(e.detail.elt, !e.detail.successful || (e.detail.xhr && e.detail.xhr.responseText.trim() !== ""));
  });
  document.addEventListener("htmx:wsAfterMessage", function () {
    var slot = $("#composer-error"), form = $("#composer");
    if (!slot || !slot.dataset.reply || !form) return;  // not the answer to a prompt
    var refused = slot.dataset.reply === "refused";
    delete slot.dataset.reply;
    endSend(form, refused);
  });
  function beginSend(form) {
    var ta = $("#prompt"), conversation = $("#conversation");
    var text = ta ? ta.value : "";
    var images = imageCount();
    if ((!text.trim() && !images) || !conversation) return;
    form.dataset.sentText = text;
    if (busy()) {
      // The agent is working: this message queues (or steers); its chip arrives with the next
      // push. Only the draft is cleared now (and given back if the send is refused).
      ta.value = "";
      ta.style.height = "";
      return;
    }
    dropOptimistic();
    var turn = document.createElement("section");
    turn.className = "turn live optimistic";
    turn.id = "optimistic-turn";
    var before = $("#live-turn");  // a turn already live is not the one this send opens
    turn.dataset.after = before ? before.dataset.requestId || "" : "";
    turn.setAttribute("aria-busy", "true");
    var msg = document.createElement("div");
    msg.className = "user-msg";
    var bubble = document.createElement("div");
    bubble.className = "bubble";
    bubble.textContent = text;
    if (images) {
      var attach = document.createElement("span");
      attach.className = "attach muted";
      attach.textContent = " + " + images + (images === 1 ? " image" : " images");
      bubble.appendChild(attach);
    }
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
    ta.value = "";
    ta.style.height = "";
    var send = $("#send-button");
    if (send) { send.disabled = true; send.classList.add("sending"); }
    var el = scroller();
    if (el) { pinned = true; el.scrollTop = el.scrollHeight; }
  }
  function endSend(form, refused) {
    if (refused) {
      dropOptimistic();
      var ta = $("#prompt");
      if (ta && !ta.value && form.dataset.sentText) ta.value = form.dataset.sentText;
      var send = $("#send-button");
      if (send && send.classList.contains("sending")) { send.disabled = false; send.classList.remove("sending"); }
    }
    delete form.dataset.sentText;
  }

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
    // The turn this send opened is live now (its opening push arrived): it takes the
    // placeholder's place, so the message is on the page once.
    var optimistic = $("#optimistic-turn"), live = $("#live-turn");
    if (optimistic && live && live.dataset.requestId !== optimistic.dataset.after) optimistic.remove();
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

  // Details a person opened (a task, a checkpoint, a tool call) stay open when a live push
  // re-renders the region they are in.
  var openDetails = new Set();
  document.addEventListener("toggle", function (e) {
    var el = e.target;
    if (!el || el.tagName !== "DETAILS" || !el.id) return;
    if (el.open) openDetails.add(el.id); else openDetails.delete(el.id);
  }, true);
  function reopen() {
    openDetails.forEach(function (id) {
      var el = document.getElementById(id);
      if (el && el.tagName === "DETAILS" && !el.open) el.open = true;
    });
  }

  // Wake times: the server renders UTC and a countdown; the page shows local time and keeps
  // the countdown ticking until the task's next snapshot replaces it.
  function pad(n) { return n < 10 ? "0" + n : "" + n; }
  function countdown(left) {
    if (left <= 0) return "firing…";
    var s = Math.ceil(left / 1000), h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
    s = s % 60;
    return "in " + (h ? h + ":" + pad(m) : m) + ":" + pad(s);
  }
  function tick() {
    var now = Date.now();
    document.querySelectorAll(".countdown[data-until]").forEach(function (el) {
      var text = countdown(Number(el.dataset.until) - now);
      if (el.textContent !== text) el.textContent = text;
    });
    document.querySelectorAll("time[data-ms]:not([data-local])").forEach(function (el) {
      el.textContent = new Date(Number(el.dataset.ms)).toLocaleTimeString();
      el.dataset.local = "1";
    });
  }
  setInterval(tick, 500);

  // Earlier messages: the page shows the newest turns; older ones load on request into
  // #conversation-older, which live pushes never touch. If the window of newest turns moves
  // on (new turns), the gap is filled; if the context was reset or compacted, it starts over.
  function older() { return $("#conversation-older"); }
  function turnsUrl() { var m = $(".session-layout"); return m ? m.dataset.turnsUrl : null; }
  function fetchTurns(start, end) {
    return fetch(turnsUrl() + "?start=" + start + "&end=" + end, {credentials: "same-origin"})
      .then(function (r) { if (!r.ok) throw new Error(r.status); return r.text(); });
  }
  function insertPage(html, where, anchor) {
    anchor.insertAdjacentHTML(where, html);
    var page = where === "afterend" ? anchor.nextElementSibling : anchor.lastElementChild;
    if (page && window.htmx) window.htmx.process(page);
  }
  function resetOlder() {
    var box = older(), conv = $("#conversation");
    if (!box || !conv) return;
    box.querySelectorAll(".turns-page").forEach(function (p) { p.remove(); });
    box.dataset.start = "";
    box.dataset.end = "";
    box.dataset.generation = conv.dataset.generation || "";
    var button = $("#load-earlier");
    if (button) button.hidden = !(Number(conv.dataset.first) > 0);
  }
  function syncOlder() {
    var box = older(), conv = $("#conversation");
    if (!box || !conv) return;
    var first = Number(conv.dataset.first), button = $("#load-earlier");
    if (box.dataset.end === "") { if (button) button.hidden = !(first > 0); return; }
    if ((box.dataset.generation || "") !== (conv.dataset.generation || "") || Number(box.dataset.end) > first) {
      resetOlder();
      return;
    }
    if (Number(box.dataset.end) < first) {
      var from = Number(box.dataset.end);
      box.dataset.end = String(first);
      fetchTurns(from, first).then(function (html) { insertPage(html, "beforeend", box); });
    }
  }
  document.addEventListener("click", function (e) {
    var button = e.target.closest ? e.target.closest("#load-earlier") : null;
    if (!button) return;
    var box = older(), conv = $("#conversation");
    var start = box.dataset.start !== "" ? Number(box.dataset.start) : Number(conv.dataset.first);
    var from = Math.max(0, start - 40);
    if (start <= 0) return;
    button.disabled = true;
    fetchTurns(from, start).then(function (html) {
      if (box.dataset.end === "") { box.dataset.end = String(start); box.dataset.generation = conv.dataset.generation || ""; }
      box.dataset.start = String(from);
      insertPage(html, "afterend", button);
      button.hidden = from <= 0;
    }).finally(function () { button.disabled = false; });
  });
  document.addEventListener("htmx:wsAfterMessage", function () { reopen(); syncOlder(); tick(); });

  document.addEventListener("DOMContentLoaded", function () {
    tick();
    var el = scroller();
    if (el) el.scrollTop = el.scrollHeight;
    var ta = $("#prompt");
    if (ta && !$("#pending .review")) ta.focus();
  });
})();
