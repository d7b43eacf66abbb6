// Behaviour shared by every page. Loaded with the CSP nonce; no inline handlers anywhere.
"use strict";

(() => {
  let activeStreams = 0;

  function composer() {
    return document.getElementById("composer");
  }

  function setSending(busy) {
    const button = document.getElementById("send-button");
    if (button) button.disabled = busy;
  }

  function scrollToEnd() {
    const list = document.getElementById("messages");
    if (list) list.scrollTop = list.scrollHeight;
  }

  function newClientId() {
    if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
    // Older browsers: a random v4 UUID from getRandomValues.
    return "10000000-1000-4000-8000-100000000000".replace(/[018]/g, (c) =>
      (c ^ (crypto.getRandomValues(new Uint8Array(1))[0] & (15 >> (c / 4)))).toString(16),
    );
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

  // Follow one reply as it streams: words as text (never HTML) while they arrive, then
  // the server's sanitised rendering once the reply is whole.
  function follow(bubble) {
    if (bubble.dataset.following) return;
    bubble.dataset.following = "1";
    const text = bubble.querySelector(".reply-text");
    const source = new EventSource(bubble.dataset.streamUrl);
    activeStreams += 1;
    setSending(true);
    let finished = false;
    const finish = () => {
      if (finished) return;
      finished = true;
      source.close();
      activeStreams -= 1;
      if (activeStreams === 0) setSending(false);
    };
    source.addEventListener("text", (event) => {
      text.textContent += JSON.parse(event.data).text;
      scrollToEnd();
    });
    source.addEventListener("done", (event) => {
      finish();
      bubble.innerHTML = JSON.parse(event.data).html;
      bubble.classList.remove("streaming");
      bubble.removeAttribute("aria-busy");
      delete bubble.dataset.streamUrl;
      scrollToEnd();
    });
    source.addEventListener("failed", (event) => {
      finish();
      const data = JSON.parse(event.data);
      showFailure(bubble, data.message, data.retry_url);
    });
    // No automatic reconnect: the server has either finished the reply or is still
    // writing it, and a reload shows which.
    source.onerror = () => {
      if (finished) return;
      finish();
      showFailure(bubble, "The connection to your coach dropped. Reload the page to see the reply.", null);
    };
  }

  function onLoad(root) {
    root.querySelectorAll("[data-stream-url]").forEach(follow);
    if (root.querySelector?.(".exchange")) document.getElementById("no-messages")?.remove();
    scrollToEnd();
  }

  document.addEventListener("DOMContentLoaded", () => {
    // On a phone the conversation list starts folded, leaving the screen to the chat.
    if (window.matchMedia("(max-width: 48rem)").matches) {
      document.querySelector(".session-list")?.removeAttribute("open");
    }
    onLoad(document);

    const form = composer();
    if (!form) return;
    const textarea = form.querySelector("textarea");

    // Enter sends; Shift+Enter (or Enter while composing an accented letter) is a newline.
    textarea.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        if (!document.getElementById("send-button").disabled) form.requestSubmit();
      }
    });

    form.addEventListener("htmx:beforeRequest", () => setSending(true));
    form.addEventListener("htmx:afterRequest", (event) => {
      if (activeStreams === 0) setSending(false);
      if (event.detail.xhr && event.detail.xhr.status < 300) {
        textarea.value = "";
        form.querySelector('input[name="client_id"]').value = newClientId();
        document.getElementById("composer-error").textContent = "";
      }
    });
  });

  document.addEventListener("htmx:load", (event) => onLoad(event.detail.elt));
})();
