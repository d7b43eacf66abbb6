// Importing what another assistant knows: copy the prompt, check the paste's size before
// sending it, count what will be saved, bring a refusal into view. Without JavaScript the prompt is plain text to select,
// the forms post as they are, and the server says what is too long.
"use strict";

(function () {
  // Characters as the server counts them (code points, the ends trimmed), so a paste
  // refused here would be refused there too, and the other way round.
  function characters(text) {
    const trimmed = text.trim();
    const pairs = trimmed.match(/[\uD800-\uDBFF][\uDC00-\uDFFF]/g);
    return trimmed.length - (pairs ? pairs.length : 0);
  }

  function number(value) {
    return value.toLocaleString("en");
  }

  // The message under the box, where the server puts its own, tied to the box. A paragraph
  // that is an alert, not a list given a role (a list with a role is no list to a screen reader).
  function showError(textarea, message) {
    const id = `${textarea.id}_error`;
    const alert = Object.assign(document.createElement("p"), { className: "errorlist", id, textContent: message });
    alert.setAttribute("role", "alert");
    const earlier = document.getElementById(id);
    if (earlier) earlier.replaceWith(alert);
    else textarea.before(alert);
    const described = new Set((textarea.getAttribute("aria-describedby") || "").split(" ").filter(Boolean));
    described.add(id);
    textarea.setAttribute("aria-describedby", [...described].join(" "));
    textarea.setAttribute("aria-invalid", "true");
    textarea.closest(".field")?.classList.add("has-error");
    textarea.focus();
  }

  // A paste past the limit is never sent: the app refuses a body that large before reading
  // it, and the page the browser would show instead has lost the text.
  document.addEventListener("submit", (event) => {
    const textarea = event.target.querySelector("textarea[data-max-chars]");
    if (!textarea) return;
    const most = Number(textarea.dataset.maxChars);
    const length = characters(textarea.value);
    if (length <= most) return;
    event.preventDefault();
    const details = textarea.closest("details");
    if (details) details.open = true;
    showError(
      textarea,
      `That is ${number(length)} characters; an import takes at most ${number(most)} at a time. ` +
        "Paste the first part now, save it, then import the rest.",
    );
  });

  async function copy(button) {
    const source = document.querySelector(button.dataset.copy);
    const status = button.parentElement.querySelector(".copy-status");
    try {
      await navigator.clipboard.writeText(source.textContent.trim());
      status.textContent = "Copied. Paste it into a new chat with the other assistant.";
    } catch {
      // No clipboard here (an old browser, or permission refused): select it to copy by hand.
      const range = document.createRange();
      range.selectNodeContents(source);
      const selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
      status.textContent = "Your browser did not let this page copy it: it is selected, so copy it with Ctrl+C (⌘C on a Mac).";
    }
  }

  // What will be saved: each ticked fact, and each that differs from a kept memory and is
  // chosen to stand in its place or beside it (the memory kept as it is saves nothing).
  function countTicked(form) {
    const proposals = [...form.querySelectorAll(".import-proposal")];
    const chosen = proposals.filter((proposal) => {
      const stands = proposal.querySelector(".import-stands input:checked");
      if (stands) return stands.value !== "kept";
      const box = proposal.querySelector(".import-keep input[type=checkbox]");
      return Boolean(box && box.checked);
    }).length;
    const button = form.querySelector("[data-save-label]");
    const count = form.querySelector("[data-ticked-count]");
    if (button) {
      button.textContent = chosen === 1 ? "Save 1 memory" : `Save ${chosen} memories`;
      button.disabled = chosen === 0;
    }
    if (count) count.textContent = `${chosen} of ${proposals.length} to save`;
  }

  function enhance() {
    // A refusal is said at the top of the page: brought into view and read out first.
    const problem = document.querySelector("[data-focus-on-load]");
    if (problem) problem.focus();
    for (const button of document.querySelectorAll("[data-copy]")) {
      button.hidden = false;
      button.addEventListener("click", () => copy(button));
    }
    for (const form of document.querySelectorAll(".import-review")) {
      countTicked(form);
      form.addEventListener("change", (event) => {
        if (event.target.matches(".import-keep input[type=checkbox], .import-stands input")) countTicked(form);
      });
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", enhance);
  else enhance();
})();
