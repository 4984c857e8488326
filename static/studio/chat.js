/* agentcore Studio — the chat's own behaviour beside studio.js: images in the composer,
   copy buttons, edit and resend, demo suggestions, keyboard shortcuts and the retry
   countdown. Everything is event delegation on document, so live pushes need no rebinding. */
(function () {
  "use strict";

  function $(sel, root) { return (root || document).querySelector(sel); }
  function composer() { return $("#composer"); }

  function showError(text) {
    var slot = $("#composer-error");
    if (!slot) return;
    slot.textContent = "";
    if (!text) return;
    var div = document.createElement("div");
    div.className = "form-error";
    div.setAttribute("role", "alert");
    div.textContent = text;
    slot.appendChild(div);
  }

  // --- images: pick, paste or drop; checked here against the runtime's limits ------------------
  var TYPES = ["image/png", "image/jpeg", "image/gif", "image/webp"];
  var picked = [];  // File objects, in order; #image-input.files mirrors them for the form post

  function syncInput() {
    var input = $("#image-input");
    if (!input) return;
    var transfer = new DataTransfer();
    picked.forEach(function (file) { transfer.items.add(file); });
    input.files = transfer.files;
    renderAttachments();
  }

  function renderAttachments() {
    var box = $("#attachments");
    if (!box) return;
    box.textContent = "";
    box.hidden = picked.length === 0;
    picked.forEach(function (file, index) {
      var chip = document.createElement("span");
      chip.className = "attachment";
      var img = document.createElement("img");
      img.src = URL.createObjectURL(file);
      img.alt = file.name || "image";
      img.onload = function () { URL.revokeObjectURL(img.src); };
      var remove = document.createElement("button");
      remove.type = "button";
      remove.className = "attachment-remove";
      remove.dataset.index = String(index);
      remove.setAttribute("aria-label", "Remove " + (file.name || "this image"));
      remove.textContent = "×";
      chip.appendChild(img);
      chip.appendChild(remove);
      box.appendChild(chip);
    });
  }

  function addImages(files) {
    var form = composer();
    if (!form || !files || !files.length) return;
    var max = Number(form.dataset.maxImages || 4), maxBytes = Number(form.dataset.maxImageBytes || 0);
    var mb = Math.round(maxBytes / 1024 / 1024);
    var problems = [];
    Array.prototype.forEach.call(files, function (file) {
      var name = file.name || "the pasted image";
      if (form.dataset.acceptsImages !== "1") {
        problems.push((form.dataset.modelName || "This model") + " does not accept images (its attributes have no \"image\" input): " + name + " was not attached.");
      } else if (TYPES.indexOf(file.type) < 0) {
        problems.push(name + " is not a PNG, JPEG, GIF or WebP image.");
      } else if (maxBytes && file.size > maxBytes) {
        problems.push(name + " is " + (file.size / 1024 / 1024).toFixed(1) + " MB: the limit is " + mb + " MB per image.");
      } else if (picked.length >= max) {
        problems.push("At most " + max + " images per message: " + name + " was not attached.");
      } else {
        picked.push(file);
      }
    });
    syncInput();
    showError(problems.join(" "));
  }

  document.addEventListener("change", function (e) {
    if (!e.target || e.target.id !== "image-input") return;
    var files = Array.prototype.slice.call(e.target.files || []);
    // The input now holds only the new choice: put the earlier picks back first.
    syncInput();
    addImages(files);
  });
  document.addEventListener("paste", function (e) {
    if (!e.target || !e.target.closest || !e.target.closest("#composer")) return;
    var files = e.clipboardData && e.clipboardData.files;
    if (files && files.length) { e.preventDefault(); addImages(files); }
  });
  document.addEventListener("dragover", function (e) {
    var form = e.target.closest ? e.target.closest("#composer") : null;
    if (!form) return;
    e.preventDefault();
    form.classList.add("dropping");
  });
  document.addEventListener("dragleave", function (e) {
    var form = e.target.closest ? e.target.closest("#composer") : null;
    if (form && !form.contains(e.relatedTarget)) form.classList.remove("dropping");
  });
  document.addEventListener("drop", function (e) {
    var form = e.target.closest ? e.target.closest("#composer") : null;
    if (!form) return;
    e.preventDefault();
    form.classList.remove("dropping");
    addImages(e.dataTransfer && e.dataTransfer.files);
  });
  document.addEventListener("click", function (e) {
    var remove = e.target.closest ? e.target.closest(".attachment-remove") : null;
    if (!remove) return;
    picked.splice(Number(remove.dataset.index), 1);
    syncInput();
  });
  document.addEventListener("htmx:afterRequest", function (e) {
    var form = e.detail && e.detail.elt;
    var menu = form && form.closest ? form.closest("#session-menu") : null;
    var accepted = e.detail && e.detail.successful && e.detail.xhr && e.detail.xhr.responseText.trim() === "";
    if (menu && accepted) { menu.open = false; form.reset(); }  // Reset / Compact now went through
    if (!form || form.id !== "composer") return;
    var refused = !e.detail.successful || (e.detail.xhr && e.detail.xhr.responseText.trim() !== "");
    if (!refused && picked.length) { picked = []; syncInput(); }
  });

  // --- copy buttons: answers, messages, code blocks, tool arguments and results ----------------
  function copyText(text, button) {
    function done() {
      if (!button) return;
      var label = button.textContent;
      button.textContent = "Copied";
      button.classList.add("copied");
      setTimeout(function () { button.textContent = label; button.classList.remove("copied"); }, 1500);
    }
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, function () { fallbackCopy(text); done(); });
    } else {
      fallbackCopy(text);
      done();
    }
  }
  function fallbackCopy(text) {
    var area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.className = "visually-hidden";
    document.body.appendChild(area);
    area.select();
    try { document.execCommand("copy"); } finally { area.remove(); }
  }
  function copySource(button) {
    var kind = button.dataset.copy;
    if (kind === "message") {
      var text = button.closest(".user-msg").querySelector(".user-text");
      return text ? text.innerText : "";
    }
    if (kind === "answer") {
      var source = button.closest(".turn-actions").querySelector("template.copy-source");
      return source ? source.content.textContent : "";
    }
    if (kind === "code") {
      var pre = button.parentNode.querySelector("pre");
      return pre ? pre.innerText : "";
    }
    if (kind === "pre") {  // the <pre> after the label that holds this button
      var next = button.closest(".kv-label").nextElementSibling;
      while (next && next.tagName !== "PRE") next = next.nextElementSibling;
      return next ? next.innerText : "";
    }
    return "";
  }
  document.addEventListener("click", function (e) {
    var button = e.target.closest ? e.target.closest(".copy-button") : null;
    if (!button) return;
    e.preventDefault();
    e.stopPropagation();  // a button in a <summary> must not toggle its <details>
    copyText(copySource(button), button);
  });
  // Code blocks in rendered answers get a copy button (live pushes replace answers: re-added).
  function codeButtons(root) {
    (root || document).querySelectorAll(".md pre").forEach(function (pre) {
      var holder = pre.parentNode;
      if (holder.classList && holder.classList.contains("code-wrap")) return;
      var wrap = document.createElement("div");
      wrap.className = "code-wrap";
      holder.insertBefore(wrap, pre);
      wrap.appendChild(pre);
      var button = document.createElement("button");
      button.type = "button";
      button.className = "btn-link copy-button code-copy";
      button.dataset.copy = "code";
      button.setAttribute("aria-label", "Copy the code");
      button.textContent = "Copy";
      wrap.appendChild(button);
    });
  }

  // --- edit and resend a past prompt -------------------------------------------------------------
  document.addEventListener("click", function (e) {
    var button = e.target.closest ? e.target.closest(".edit-button") : null;
    if (!button) return;
    var layout = $(".session-layout");
    var msg = button.closest(".user-msg");
    if (!layout || !msg || msg.querySelector(".edit-form")) return;
    var text = msg.querySelector(".user-text");
    var form = document.createElement("form");
    form.className = "edit-form";
    form.setAttribute("hx-post", layout.dataset.editUrl);
    form.setAttribute("hx-target", "#composer-error");
    form.setAttribute("hx-swap", "innerHTML");
    var area = document.createElement("textarea");
    area.name = "prompt";
    area.rows = 3;
    area.value = text ? text.innerText : "";
    area.setAttribute("aria-label", "Edit the message");
    form.appendChild(area);
    [["entry_id", button.dataset.entry], ["first", button.dataset.first === "1" ? "on" : ""]].forEach(function (pair) {
      if (!pair[1]) return;
      var hidden = document.createElement("input");
      hidden.type = "hidden";
      hidden.name = pair[0];
      hidden.value = pair[1];
      form.appendChild(hidden);
    });
    var bar = document.createElement("div");
    bar.className = "edit-bar";
    var note = document.createElement("small");
    note.className = "muted";
    note.textContent = button.dataset.first === "1"
      ? "The first message has nothing before it: this opens a new session with the same settings."
      : "Sends the new text in a fork from before this message; this conversation stays as it is.";
    var cancel = document.createElement("button");
    cancel.type = "button";
    cancel.className = "btn btn-ghost btn-small edit-cancel";
    cancel.textContent = "Cancel";
    var send = document.createElement("button");
    send.type = "submit";
    send.className = "btn btn-primary btn-small edit-send";
    send.textContent = "Send as a fork";
    if (button.dataset.first === "1") send.textContent = "Send in a new session";
    bar.appendChild(note);
    bar.appendChild(cancel);
    bar.appendChild(send);
    form.appendChild(bar);
    msg.appendChild(form);
    if (window.htmx) window.htmx.process(form);
    area.focus();
  });
  document.addEventListener("click", function (e) {
    var cancel = e.target.closest ? e.target.closest(".edit-cancel") : null;
    if (cancel) cancel.closest(".edit-form").remove();
  });

  // --- the demo's suggestions: one click sends the prompt in its mode ---------------------------
  document.addEventListener("click", function (e) {
    var button = e.target.closest ? e.target.closest(".suggestion[data-prompt]") : null;
    var form = composer();
    if (!button || !form) return;
    var radio = form.querySelector('input[name=agent][value="' + (button.dataset.agent || "build") + '"]');
    if (radio) radio.checked = true;
    var ta = $("#prompt");
    ta.value = button.dataset.prompt;
    form.requestSubmit($("#send-button") || undefined);
  });

  // --- a retry: its Stop is the composer's, and "retrying in N s" counts down -------------------
  document.addEventListener("click", function (e) {
    var button = e.target.closest ? e.target.closest(".retry-stop") : null;
    if (!button) return;
    var stop = $("#stop-button");
    if (stop) stop.click();
  });
  function retryCountdown() {
    var now = Date.now();
    document.querySelectorAll("#live-blocks .retry[data-retry-delay]").forEach(function (block) {
      if (!block.dataset.until) block.dataset.until = String(now + Number(block.dataset.retryDelay) * 1000);
      var left = Math.ceil((Number(block.dataset.until) - now) / 1000);
      var label = block.querySelector(".retry-in");
      if (label) label.textContent = left > 0 ? "in " + left + " s" : "now";
    });
  }
  setInterval(retryCountdown, 500);

  // --- keyboard shortcuts (shown under the composer, listed in docs/studio.md) ------------------
  function typing(target) {
    if (!target) return false;
    var tag = target.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || target.isContentEditable;
  }
  document.addEventListener("keydown", function (e) {
    if (e.altKey && !e.ctrlKey && !e.metaKey && e.code === "KeyN") {  // new session
      e.preventDefault();
      var list = $("#new-session");
      if (list) focusNewSession(); else window.location.href = "/#new-session";
    } else if (e.altKey && !e.ctrlKey && !e.metaKey && e.code === "KeyS") {  // stop the turn
      var stop = $("#stop-button");
      if (stop) { e.preventDefault(); stop.click(); }
    } else if (e.key === "/" && !e.altKey && !e.ctrlKey && !e.metaKey && !typing(e.target)) {  // the message box
      var ta = $("#prompt");
      if (ta) { e.preventDefault(); ta.focus(); }
    }
  });
  function focusNewSession() {
    var section = $("#new-session");
    if (!section) return;
    section.scrollIntoView({block: "start"});
    var first = section.querySelector("select, input:not([type=hidden]), textarea");
    if (first) first.focus();
  }
  document.addEventListener("click", function (e) {
    if (e.target.closest && e.target.closest("#new-session-link")) { e.preventDefault(); focusNewSession(); }
  });

  document.addEventListener("htmx:wsAfterMessage", function () { codeButtons(); retryCountdown(); });
  document.addEventListener("DOMContentLoaded", function () {
    codeButtons();
    var scroll = $("#conversation-scroll");
    if (scroll && $("#conversation-empty")) scroll.scrollTop = 0;  // an empty session reads from the top
  });
  // After load: the browser's own scroll to the #new-session fragment comes after
  // DOMContentLoaded and would take a focus given earlier away.
  function hashFocus() { if (window.location.hash === "#new-session") focusNewSession(); }
  window.addEventListener("load", hashFocus);
  window.addEventListener("hashchange", hashFocus);
})();
