// The "search the web" box shows only for a collection that allows the web fallback
// and a profile that searches the web (the server refuses the request otherwise).
(function () {
  "use strict";
  var box = document.querySelector("[data-web-fallback]");
  var form = document.getElementById("ask-form");
  if (!box || !form || !form.elements.collection || !form.elements.profile) { return; }
  var collections = box.getAttribute("data-collections").split(",");
  var profiles = box.getAttribute("data-profiles").split(",");
  var input = box.querySelector("input");
  function update() {
    var show = collections.indexOf(form.elements.collection.value) >= 0 &&
      profiles.indexOf(form.elements.profile.value) >= 0;
    box.hidden = !show;
    input.disabled = !show;
    if (!show) { input.checked = false; }
  }
  form.elements.collection.addEventListener("change", update);
  form.elements.profile.addEventListener("change", update);
  update();
})();

// Streams an answer into the ask page: stage progress, then the answer as it is
// generated, then the server-rendered answer (citations and trace). Without this
// script the form posts normally and the page comes back with the answer.
(function () {
  "use strict";
  var form = document.getElementById("ask-form");
  if (!form || !window.fetch || !window.TextDecoder || !window.ReadableStream) { return; }
  var area = document.getElementById("answer-area");
  var button = form.querySelector("[data-submit]");
  var question = form.querySelector("[name=question]");
  // The conversation page keeps every answer: each new one goes after the others.
  var append = area.hasAttribute("data-append");
  // "Ask a follow-up" links to the conversation's box: ready to type (once the
  // page has loaded, since going to the #follow-up fragment takes the focus away).
  if (append && window.location.hash === "#follow-up") {
    window.addEventListener("load", function () { question.focus(); });
  }

  question.addEventListener("keydown", function (event) {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      form.requestSubmit ? form.requestSubmit() : form.submit();
    }
  });

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) { node.className = className; }
    if (text) { node.textContent = text; }  // text only: never parsed as HTML
    return node;
  }

  // Each profile's stages (a JSON script the page carries): listed as pending when
  // the question is sent, ticked off with their key facts as the server reports them.
  var plansNode = document.getElementById("profile-stages");
  var plans = plansNode ? JSON.parse(plansNode.textContent) : {};

  function stageItem(name) {
    var item = el("li", "pending");
    item.dataset.stage = name;
    item.append(el("span", "mark", "○"), el("span", "name", name), el("span", "stage-facts", ""));
    return item;
  }

  function progressList(profile) {
    var list = el("ol", "progress-stages small");
    list.setAttribute("aria-label", "Progress");
    (plans[profile] || []).forEach(function (name) { list.append(stageItem(name)); });
    return list;
  }

  // The first stage still pending is the one running now; the label names it.
  function markRunning(list, label) {
    var next = null;
    Array.prototype.some.call(list.children, function (item) {
      if (item.classList.contains("pending")) { next = item; }
      return next !== null;
    });
    Array.prototype.forEach.call(list.querySelectorAll(".running"), function (item) {
      item.classList.remove("running");
    });
    if (next) {
      next.classList.add("running");
      next.querySelector(".mark").textContent = "…";
      label.textContent = "Working: " + next.dataset.stage + "…";
    }
  }

  function markDone(list, data) {
    var item = null;
    Array.prototype.some.call(list.children, function (candidate) {
      if (candidate.dataset.stage === data.stage && !candidate.classList.contains("done")) {
        item = candidate;
      }
      return item !== null;
    });
    if (!item) {
      // A stage the list did not name (a follow-up's condense) goes before those to come.
      item = stageItem(data.stage);
      var later = null;
      Array.prototype.some.call(list.children, function (candidate) {
        if (!candidate.classList.contains("done")) { later = candidate; }
        return later !== null;
      });
      list.insertBefore(item, later);
    }
    item.className = data.skipped ? "done skipped" : "done";
    item.querySelector(".mark").textContent = data.skipped ? "–" : "✓";
    var facts = (data.summary || []).filter(Boolean);
    facts.push(Math.round(data.duration_ms) + " ms");
    item.querySelector(".stage-facts").textContent = facts.join(" · ");
    if (data.warnings && data.warnings.length) {
      var warn = el("span", "warn", "⚠ " + data.warnings.join("; "));
      item.append(warn);
    }
  }

  function showError(message, into) {
    into = into || area;
    into.replaceChildren(el("p", "message error", message));
    into.firstChild.setAttribute("role", "alert");
  }

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    var card = el("article", "card answer-card");
    var stages = progressList(form.elements.profile ? form.elements.profile.value : "");
    var text = el("div", "answer streaming");
    var label = el("p", "label", "Working…");
    card.append(label, stages, text);
    markRunning(stages, label);
    var slot = area;
    if (append) { slot = el("div", "turn"); area.append(slot); }
    slot.replaceChildren(card);
    button.disabled = true;

    var handlers = {
      step: function (data) {
        markDone(stages, data);
        markRunning(stages, label);
      },
      context: function (data) {
        label.textContent = data.passages + " passage(s) found; writing the answer…";
      },
      token: function (data) {
        if (data.reset) { text.textContent = ""; }
        text.textContent += data.text;
      },
      done: function (data) {
        slot.innerHTML = data.html;  // rendered and escaped by the server
        if (window.htmx) { window.htmx.process(slot); }
        if (append) { question.value = ""; }
        var heading = slot.querySelector(".question");
        if (heading) { heading.setAttribute("tabindex", "-1"); heading.focus(); }
      },
      error: function (data) { showError(data.message, slot); }
    };

    function dispatch(block) {
      var name = "message", data = "";
      block.split("\n").forEach(function (line) {
        if (line.indexOf("event: ") === 0) { name = line.slice(7); }
        else if (line.indexOf("data: ") === 0) { data += line.slice(6); }
      });
      if (handlers[name] && data) { handlers[name](JSON.parse(data)); }
    }

    fetch(form.dataset.streamUrl, {
      method: "POST",
      body: new FormData(form),
      credentials: "same-origin",
      headers: { "Accept": "text/event-stream" }
    }).then(function (response) {
      if (!response.ok) { throw new Error("The server answered " + response.status + "."); }
      var reader = response.body.getReader();
      var decoder = new TextDecoder();
      var buffer = "";
      function pump() {
        return reader.read().then(function (chunk) {
          if (chunk.done) { if (buffer.trim()) { dispatch(buffer); } return; }
          buffer += decoder.decode(chunk.value, { stream: true });
          var parts = buffer.split("\n\n");
          buffer = parts.pop();
          parts.forEach(dispatch);
          return pump();
        });
      }
      return pump();
    }).catch(function (error) {
      showError(error.message || "The answer could not be loaded.", slot);
    }).finally(function () {
      button.disabled = false;
      text.classList.remove("streaming");
    });
  });
})();
