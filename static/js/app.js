// Behaviour shared by every page. Loaded with the CSP nonce; no inline handlers anywhere.
"use strict";

(() => {
  // The replies being followed here, by stream: the bubble each one is shown in.
  const following = new Map();
  const STILL_THINKING_AFTER_MS = 6000;
  const fetching = new Set();

  // What a failed request means to the person, by status; the server's own words win
  // when it sends plain text.
  const FAILED_REQUEST = {
    0: "Couldn't reach the server. Check your connection, then try again.",
    400: "That couldn't be read. Reload the page, then try again.",
    403: "This page is out of date or you were signed out. Reload it, then try again.",
    404: "That is no longer here. Reload the page.",
    413: "That is too much to send at once. Try sending less.",
    429: "That is a lot in a short time. Wait a moment, then try again.",
    500: "Something went wrong on our side. Nothing you wrote was lost: try again in a moment.",
    502: "The app is restarting or out of reach. Try again in a moment.",
    503: "The app is restarting or out of reach. Try again in a moment.",
    504: "The app took too long to answer. Try again in a moment.",
  };

  function sendButton() {
    return document.getElementById("send-button");
  }

  function setSending(busy) {
    const button = sendButton();
    if (button) button.disabled = busy;
  }

  // While earlier messages load above the ones shown: how far the view was from the end,
  // so what the person reads stays where it is.
  let keptFromEnd = null;

  function scrollToEnd() {
    const list = document.getElementById("messages");
    if (list && keptFromEnd === null) list.scrollTop = list.scrollHeight;
  }

  function newClientId() {
    if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
    // Older browsers: a random v4 UUID from getRandomValues.
    return "10000000-1000-4000-8000-100000000000".replace(/[018]/g, (c) =>
      (c ^ (crypto.getRandomValues(new Uint8Array(1))[0] & (15 >> (c / 4)))).toString(16),
    );
  }

  function showError(origin, text) {
    const inComposer = origin && origin.closest && origin.closest("#composer");
    // Regenerate's and an edit's own place for what went wrong, beside them.
    const beside = origin && origin.closest && origin.closest(".message-edit-form, .answer-actions");
    const target = inComposer
      ? document.getElementById("composer-error")
      : beside?.querySelector(".answer-error") || document.getElementById("page-alert");
    if (target) target.textContent = text;
  }

  function settle(bubble, html, note) {
    bubble.innerHTML = html;
    bubble.classList.remove("streaming");
    bubble.removeAttribute("aria-busy");
    delete bubble.dataset.streamUrl;
    if (note) {
      const p = document.createElement("p");
      p.className = "note";
      p.textContent = note;
      bubble.appendChild(p);
    }
  }

  function showFailure(bubble, message, retryUrl) {
    const template = document.getElementById("reply-failed-template");
    const failure = template.content.firstElementChild.cloneNode(true);
    failure.querySelector(".failure-text").textContent = message;
    const form = failure.querySelector(".retry-form");
    const exchange = bubble.closest(".exchange");
    if (retryUrl) {
      form.action = retryUrl;
      form.setAttribute("hx-post", retryUrl);
      form.setAttribute("hx-target", "#" + exchange.id);
      form.setAttribute("hx-swap", "outerHTML");
    } else {
      form.remove();
    }
    const partial = bubble.querySelector(".reply-text").textContent.trim();
    bubble.querySelector(".stop-form")?.remove();
    if (partial) {
      bubble.classList.remove("streaming");
      bubble.classList.add("interrupted");
      bubble.removeAttribute("aria-busy");
      bubble.querySelector(".typing")?.remove();
      const note = document.createElement("p");
      note.className = "note";
      note.textContent = "This reply was cut off.";
      bubble.appendChild(note);
      bubble.after(failure);
    } else {
      bubble.replaceWith(failure);
    }
    htmx.process(failure);
  }

  const CUE_WORDS = {
    saved: "Saved to memory",
    updated: "Updated in memory",
    proposed: "Suggested a change to",
    deleted: "Removed from memory",
  };

  // A quiet line under the reply for each past conversation the coach looked back at.
  function showLookBack(area, cue) {
    for (const conversation of cue.conversations || []) {
      const line = document.createElement("p");
      line.className = "memory-cue look-back-cue";
      line.append(`Looked back at: your conversation of ${conversation.date}`);
      if (conversation.url) {
        const open = document.createElement("a");
        open.href = conversation.url;
        open.textContent = "Open";
        line.append(" · ", open);
      }
      area.appendChild(line);
    }
  }

  // A quiet line under the reply when the coach saved, changed or suggested a memory.
  function showCue(exchange, cue) {
    const area = exchange.querySelector(".memory-cues");
    if (!area) return;
    if (cue.action === "looked_back") {
      showLookBack(area, cue);
      return;
    }
    const line = document.createElement("p");
    line.className = "memory-cue";
    line.append(`${CUE_WORDS[cue.action] || "Memory"}: ${cue.summary}`);
    if (cue.view_url) {
      const view = document.createElement("a");
      view.href = cue.view_url;
      view.textContent = cue.action === "proposed" ? "Review" : "View";
      line.append(" · ", view);
    }
    if (cue.undo_url) {
      const undo = document.createElement("button");
      undo.type = "button";
      undo.className = "link";
      undo.textContent = "Undo";
      undo.addEventListener("click", () => undoSave(line, undo, cue));
      line.append(" · ", undo);
    }
    area.appendChild(line);
  }

  async function undoSave(line, button, cue) {
    button.disabled = true;
    const token = document.querySelector('input[name="csrfmiddlewaretoken"]')?.value || "";
    try {
      const response = await fetch(cue.undo_url, {
        method: "POST",
        headers: { "X-CSRFToken": token, "HX-Request": "true" },
        credentials: "same-origin",
      });
      if (!response.ok) throw new Error(String(response.status));
      line.textContent = `Not kept: ${cue.summary}`;
    } catch (error) {
      button.disabled = false;
      showError(null, "That memory couldn't be removed just now. Try again, or delete it on your Memories page.");
    }
  }

  // Follow one reply as it is written: the words so far at once (the server replays them),
  // then each new piece. Words are shown as text (never HTML) while they arrive, then as
  // the server's sanitised rendering once the reply is whole. A dropped connection is
  // picked up where it left off (the browser sends the last event's id back).
  function follow(bubble) {
    const url = bubble.dataset.streamUrl;
    if (!url) return;
    const earlier = following.get(url);
    if (earlier && earlier.bubble.isConnected) return;
    // The exchange was shown anew (answered again, or fetched twice): this bubble follows.
    earlier?.finish();
    setSending(true);
    const text = bubble.querySelector(".reply-text");
    const exchange = bubble.closest(".exchange");
    const source = new EventSource(url);
    let finished = false;
    const finish = () => {
      if (finished) return;
      finished = true;
      clearTimeout(thinking);
      source.close();
      if (following.get(url)?.bubble === bubble) following.delete(url);
      if (following.size === 0) setSending(false);
    };
    following.set(url, { bubble, finish });
    const data = (event) => JSON.parse(event.data);
    // A model slow to start: after a few seconds the person is told it is still thinking.
    const thinking = setTimeout(() => {
      if (finished || text.textContent) return;
      const note = document.createElement("p");
      note.className = "note thinking";
      note.textContent = "Still thinking…";
      bubble.querySelector(".typing")?.after(note);
    }, STILL_THINKING_AFTER_MS);
    source.addEventListener("open", () => bubble.classList.remove("reconnecting"));
    source.addEventListener("text", (event) => {
      bubble.querySelector(".thinking")?.remove();
      text.textContent += data(event).text;
      scrollToEnd();
    });
    source.addEventListener("memory", (event) => showCue(exchange, data(event)));
    source.addEventListener("done", (event) => {
      finish();
      settle(bubble, data(event).html, "");
      scrollToEnd();
    });
    source.addEventListener("stopped", (event) => {
      finish();
      const html = data(event).html;
      settle(bubble, html, html ? "You stopped this reply." : "You stopped this reply before your coach wrote anything.");
      bubble.classList.add("stopped");
    });
    source.addEventListener("failed", (event) => {
      finish();
      const failure = data(event);
      if (failure.limited && failure.exchange_url) {
        // Stopped at its length limit: the page's own exchange, with Continue and Retry.
        htmx.ajax("GET", failure.exchange_url, { target: exchange, swap: "outerHTML" });
        return;
      }
      showFailure(bubble, failure.message, failure.retry_url);
    });
    source.onerror = () => {
      if (finished) return;
      if (source.readyState === EventSource.CONNECTING) {
        // The browser tries again by itself, from the last piece it received.
        bubble.classList.add("reconnecting");
        return;
      }
      finish();
      showFailure(
        bubble,
        "Your coach's reply can't be followed here just now (too many open tabs, or you were signed out). Reload the page to see it.",
        null,
      );
    };
  }

  // Messages posted in this conversation from another tab appear here too.
  function followConversation(list) {
    const url = list.dataset.eventsUrl;
    if (!url || list.dataset.following) return;
    list.dataset.following = "1";
    const source = new EventSource(url);
    source.addEventListener("message", (event) => {
      const posted = JSON.parse(event.data);
      const id = "exchange-" + posted.message_id;
      if (fetching.has(id)) return;
      const shown = document.getElementById(id);
      if (shown) {
        // Answered again from another tab: shown anew here, unless this tab asked (and follows it).
        const bubble = shown.querySelector("[data-stream-url]");
        if (!posted.again || (bubble && following.get(bubble.dataset.streamUrl)?.bubble === bubble)) return;
        fetching.add(id);
        htmx.ajax("GET", posted.url, { target: shown, swap: "outerHTML" }).finally(() => fetching.delete(id));
        return;
      }
      fetching.add(id);
      htmx
        .ajax("GET", posted.url, { target: "#messages", swap: "beforeend" })
        .finally(() => fetching.delete(id));
    });
  }

  function onLoad(root) {
    // The same exchange can arrive twice (this tab's own post, and the news of it): the
    // later copy goes.
    const exchanges = root.matches?.(".exchange") ? [root] : [...(root.querySelectorAll?.(".exchange") || [])];
    for (const exchange of exchanges) {
      if (document.querySelectorAll("#" + exchange.id).length > 1) {
        exchange.remove();
        return;
      }
    }
    root.querySelectorAll?.("[data-stream-url]").forEach(follow);
    if (root.matches?.("[data-stream-url]")) follow(root);
    if (document.querySelector(".exchange")) document.getElementById("no-messages")?.remove();
    scrollToEnd();
  }

  function setUpComposer(form) {
    const textarea = form.querySelector("textarea");
    const hint = document.getElementById("composer-hint");
    const count = document.getElementById("composer-count");
    const max = Number(textarea.dataset.maxChars) || 0;
    const usualHint = hint.textContent;

    const fit = () => {
      // Grows with its text up to the height the stylesheet allows, then scrolls.
      textarea.style.height = "auto";
      textarea.style.height = textarea.scrollHeight + 2 + "px";
      const length = textarea.value.length;
      // The limit shows once it is near, so it never comes as a surprise.
      count.hidden = !max || length < max * 0.8;
      count.textContent = `${length.toLocaleString()} / ${max.toLocaleString()}`;
      count.classList.toggle("at-limit", length >= max);
    };
    const say = (words) => {
      hint.textContent = words;
      clearTimeout(say.timer);
      say.timer = setTimeout(() => (hint.textContent = usualHint), 4000);
    };

    textarea.addEventListener("input", fit);
    // Enter sends; Shift+Enter (or Enter while composing an accented letter) is a newline.
    textarea.addEventListener("keydown", (event) => {
      if (event.key !== "Enter" || event.shiftKey || event.isComposing) return;
      event.preventDefault();
      if (sendButton().disabled) {
        say("Enter can't send yet: your coach is still answering. Wait for the reply, or stop it.");
      } else if (!textarea.value.trim()) {
        say("Write something first: the message is empty.");
      } else {
        form.requestSubmit();
      }
    });

    form.addEventListener("htmx:beforeRequest", () => setSending(true));
    form.addEventListener("htmx:afterRequest", (event) => {
      if (following.size === 0) setSending(false);
      // Only a request the server took empties the box; a refusal or a lost one keeps it.
      const status = event.detail.xhr ? event.detail.xhr.status : 0;
      if (status >= 200 && status < 300) {
        textarea.value = "";
        fit();
        form.querySelector('input[name="client_id"]').value = newClientId();
        document.getElementById("composer-error").textContent = "";
        // Ready for the next message, wherever a click on Send left the focus.
        textarea.focus();
      }
    });
    fit();
  }

  document.addEventListener("DOMContentLoaded", () => {
    // On a phone the conversation list starts folded, leaving the screen to the chat.
    if (window.matchMedia("(max-width: 48rem)").matches) {
      document.querySelector(".session-list")?.removeAttribute("open");
    }
    onLoad(document);
    const list = document.getElementById("messages");
    if (list) followConversation(list);
    const form = document.getElementById("composer");
    if (form) setUpComposer(form);
  });

  document.addEventListener("htmx:load", (event) => onLoad(event.detail.elt));

  document.addEventListener("htmx:beforeSwap", (event) => {
    const list = document.getElementById("messages");
    if (list && event.detail.target.matches?.(".earlier")) keptFromEnd = list.scrollHeight - list.scrollTop;
  });
  document.addEventListener("htmx:afterSettle", () => {
    const list = document.getElementById("messages");
    if (list && keptFromEnd !== null) list.scrollTo({ top: list.scrollHeight - keptFromEnd, behavior: "instant" });
    keptFromEnd = null;
  });

  // A temporary conversation is deleted once its page is left (closed, or left for another
  // page): the page says so as it goes. A reload, or another tab on it, keeps it.
  window.addEventListener("pagehide", (event) => {
    const url = document.getElementById("messages")?.dataset.leaveUrl;
    if (!url || event.persisted) return;
    const data = new FormData();
    data.append("csrfmiddlewaretoken", document.querySelector('input[name="csrfmiddlewaretoken"]')?.value || "");
    navigator.sendBeacon(url, data);
  });

  // A cue's Undo on a page the server drew (a form, so it works without JavaScript too)
  // takes the memory back here, as a cue drawn while the reply was written does.
  document.addEventListener("submit", (event) => {
    const form = event.target;
    if (!form.matches?.("form.cue-undo")) return;
    event.preventDefault();
    const button = event.submitter || document.querySelector(`[form="${form.id}"]`);
    const line = button?.closest(".memory-cue");
    if (line) undoSave(line, button, { undo_url: form.action, summary: form.dataset.summary });
  });

  // Editing a message: the box is ready to type in when it opens, Enter sends it as in the
  // message box, Escape puts it away.
  document.addEventListener(
    "toggle",
    (event) => {
      const edit = event.target;
      if (!edit.matches?.(".message-edit") || !edit.open) return;
      const box = edit.querySelector("textarea");
      box.focus();
      box.setSelectionRange(box.value.length, box.value.length);
    },
    true,
  );
  document.addEventListener("keydown", (event) => {
    const box = event.target.closest?.(".message-edit-form textarea");
    if (!box) return;
    if (event.key === "Escape") {
      const edit = box.closest(".message-edit");
      edit.open = false;
      edit.querySelector("summary").focus();
    } else if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      box.form.requestSubmit();
    }
  });

  // Paging through a message's answers, or answering it anew, draws the exchange again:
  // the focus goes back where it was (the same arrow), or, after an answer anew, to the
  // message box.
  let refocus = null;
  document.addEventListener("htmx:beforeRequest", (event) => {
    const from = event.detail.elt;
    if (from.closest?.(".answer-pager")) refocus = { pager: from.id, exchange: from.closest(".exchange").id };
    else if (from.matches?.(".regenerate-form, .message-edit-form")) refocus = { composer: true };
  });
  document.addEventListener("htmx:afterRequest", (event) => {
    if (!event.detail.successful) refocus = null;
  });
  document.addEventListener("htmx:afterSettle", () => {
    if (!refocus) return;
    const wanted = refocus;
    refocus = null;
    if (wanted.pager) {
      const exchange = document.getElementById(wanted.exchange);
      const arrow = document.getElementById(wanted.pager) || exchange?.querySelector(".answer-pager a");
      arrow?.focus();
    } else {
      document.getElementById("composer-text")?.focus();
    }
  });

  document.addEventListener("click", (event) => {
    // A Stop says so at once; the reply ends within a moment, with what was written kept.
    const stop = event.target.closest?.(".stop-button");
    if (stop) setTimeout(() => ((stop.disabled = true), (stop.textContent = "Stopping…")));
  });

  // What a failed request means: the server's own words when it sends plain text.
  function failureText(xhr) {
    const plain = (xhr.getResponseHeader("Content-Type") || "").startsWith("text/plain");
    const text = plain && xhr.responseText.trim() ? xhr.responseText.trim() : FAILED_REQUEST[xhr.status];
    return text || `That didn't work (error ${xhr.status}). Nothing was lost: try again.`;
  }

  // Regenerate and an edit refused: their words go beside the form, never in the exchange,
  // and the focus stays where it is.
  document.addEventListener("htmx:beforeSwap", (event) => {
    const from = event.detail.requestConfig?.elt;
    if (event.detail.xhr.status < 400 || !from?.matches?.(".regenerate-form, .message-edit-form")) return;
    event.detail.shouldSwap = false;
    event.detail.isError = false;
    refocus = null;
    showError(from, failureText(event.detail.xhr));
  });

  // Every request that fails says why, beside the form that sent it or at the top.
  document.addEventListener("htmx:responseError", (event) => showError(event.detail.elt, failureText(event.detail.xhr)));
  document.addEventListener("htmx:sendError", (event) => showError(event.detail.elt, FAILED_REQUEST[0]));
  document.addEventListener("htmx:beforeRequest", () => {
    const alert = document.getElementById("page-alert");
    if (alert) alert.textContent = "";
  });
})();
