// The memory and account pages: small enhancements on top of htmx. Without JavaScript
// every action still works as a plain form or link; nothing here is needed to use them.
"use strict";

(function () {
  const PROSPECTIVE = "prospective";

  // Due date and status only mean something for a prospective memory.
  function showProspectiveFields(form) {
    const tier = form.querySelector("[name=tier]");
    if (!tier) return;
    for (const field of form.querySelectorAll(".prospective-only")) {
      field.hidden = tier.value !== PROSPECTIVE;
    }
  }

  function updateCounter(input) {
    const counter = input.parentElement.querySelector(".counter");
    const limit = Number(input.dataset.limit);
    if (!counter || !limit) return;
    const length = input.value.trim().length;
    // Quiet until it matters: shown from 80% of the limit.
    counter.textContent = length >= limit * 0.8 ? `${length} / ${limit}` : "";
    counter.classList.toggle("over", length > limit);
  }

  function enhance(root) {
    for (const form of root.querySelectorAll(".memory-form")) showProspectiveFields(form);
    if (root.matches && root.matches(".memory-form")) showProspectiveFields(root);
    for (const input of root.querySelectorAll("[data-limit]")) updateCounter(input);
    for (const button of root.querySelectorAll("[data-use-browser-time-zone]")) {
      const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
      const select = button.closest(".field").querySelector("select");
      if (zone && select && select.querySelector(`option[value="${CSS.escape(zone)}"]`) && select.value !== zone) {
        button.textContent = `Use this device’s time zone (${zone.replace(/_/g, " ")})`;
        button.dataset.zone = zone;
        button.hidden = false;
      }
    }
  }

  document.addEventListener("change", (event) => {
    const form = event.target.closest(".memory-form");
    if (form && event.target.name === "tier") showProspectiveFields(form);
  });

  document.addEventListener("input", (event) => {
    if (event.target.dataset && event.target.dataset.limit) updateCounter(event.target);
  });

  document.addEventListener("click", (event) => {
    const button = event.target.closest("[data-use-browser-time-zone]");
    if (!button) return;
    const select = button.closest(".field").querySelector("select");
    select.value = button.dataset.zone;
    button.hidden = true;
  });

  // Focus never falls back to the top of the page when the element holding it is swapped
  // out: it goes where the person's next step is. A Cancel gives it back to the control
  // that opened what it cancels (remembered here, as that control is replaced meanwhile).
  let returnFocus = null;
  // Where the last request came from: a list updated in passing never takes the focus.
  let keptFromList = false;
  document.addEventListener("htmx:beforeRequest", (event) => {
    keptFromList = Boolean(event.detail.elt.closest("#next-to-forget"));
  });

  // Escape puts away an editor or a delete question as its Cancel does (the focus goes back
  // to what opened it); what was typed is discarded only once the person says so.
  document.addEventListener("keydown", (event) => {
    if (event.key !== "Escape" || event.defaultPrevented || event.isComposing) return;
    const article = event.target.closest?.("article.memory");
    const cancel = article?.querySelector("[data-return-focus]");
    if (!cancel) return;
    event.preventDefault();
    const form = article.querySelector("form.memory-form");
    if (form && typed(form) && !window.confirm("Discard your changes to this memory?")) return;
    cancel.click();
  });

  // What was typed since the editor came is what Escape would discard: each field against
  // the value the page was sent with (its default), so a person quicker than the page's
  // own set-up still counts as having typed.
  function typed(form) {
    return [...form.elements].some((field) => {
      if (field.type === "checkbox" || field.type === "radio") return field.checked !== field.defaultChecked;
      if (field.tagName === "SELECT") {
        // A menu sent with no option marked selected shows its first.
        const sent = Math.max(0, [...field.options].findIndex((option) => option.defaultSelected));
        return field.options.length > 0 && field.selectedIndex !== sent;
      }
      return "defaultValue" in field && field.type !== "hidden" && field.value !== field.defaultValue;
    });
  }

  document.addEventListener("click", (event) => {
    const cancel = event.target.closest("[data-return-focus]");
    const article = cancel && cancel.closest("article");
    returnFocus = article ? { id: article.id, control: cancel.dataset.returnFocus } : null;
  });

  function focusOn(element) {
    if (!element) return;
    if (!element.matches("a[href], button, input, select, textarea, [tabindex]")) element.setAttribute("tabindex", "-1");
    element.focus();
  }

  function isMemory(element) {
    return element && element.matches("article.memory") && !element.matches(".deleted");
  }

  // After a deletion: the next memory, else the one before, else the list's heading.
  function focusAfterDelete(deleted) {
    let next = deleted.nextElementSibling;
    while (next && !isMemory(next)) next = next.nextElementSibling;
    let previous = deleted.previousElementSibling;
    while (previous && !isMemory(previous)) previous = previous.previousElementSibling;
    const section = deleted.closest("section");
    focusOn(next || previous || (section && section.querySelector("h2")) || deleted);
  }

  // The Undo lasts as long as the server honours it; then the row says it is for good.
  function expireUndo(deleted) {
    const until = Number(deleted.dataset.undoUntil) * 1000;
    if (!until) return;
    window.setTimeout(() => {
      const form = deleted.querySelector(".undo-form");
      if (!form || !form.isConnected) return;
      const hadFocus = form.contains(document.activeElement);
      form.remove();
      const note = deleted.querySelector(".undo-note");
      if (note) note.textContent = "Deleted for good.";
      if (hadFocus) focusOn(deleted);
    }, Math.max(0, until - Date.now()));
  }

  function placeFocus(element) {
    if (!element.matches) return;
    if (element.matches(".memory.editing")) {
      const first = element.querySelector(".has-error textarea, .has-error input, .has-error select")
        || element.querySelector("[name=summary]");
      focusOn(first);
    } else if (element.matches(".memory.confirming")) {
      focusOn(element.querySelector(".confirm-question"));
    } else if (element.matches(".memory.deleted")) {
      expireUndo(element);
      if (element.hasAttribute("data-focus-next")) focusAfterDelete(element);
      else if (element.querySelector("[role=alert]")) focusOn(element);
    } else if (element.matches("article.memory") && returnFocus && returnFocus.id === element.id) {
      focusOn(element.querySelector(`[data-control="${returnFocus.control}"]`) || element);
      returnFocus = null;
    } else if (element.matches("article.memory, .overlap.done") && lostFocus()) {
      // Saved, undone, merged: the new content itself.
      focusOn(element);
    } else if (element.matches("#next-to-forget") && keptFromList) {
      focusOn(element.querySelector("h2"));
    }
  }

  function lostFocus() {
    return !document.activeElement || document.activeElement === document.body;
  }

  // New content from htmx: enhance it, and put the focus where the person's next step is.
  document.addEventListener("htmx:load", (event) => {
    const element = event.detail.elt;
    enhance(element);
    placeFocus(element);
  });

  // htmx does not swap error responses; say something rather than nothing.
  document.addEventListener("htmx:responseError", (event) => {
    const status = event.detail.xhr.status;
    notify(
      status === 404
        ? "That is no longer there. Reload the page to see your memories as they are now."
        : "Something went wrong. Reload the page and try again; nothing you saved is lost.",
    );
  });
  document.addEventListener("htmx:sendError", () => {
    notify("The app could not be reached. Check your connection and try again.");
  });

  function notify(text) {
    let toast = document.querySelector(".toast");
    if (!toast) {
      toast = document.createElement("p");
      toast.className = "toast";
      toast.setAttribute("role", "alert");
      document.body.append(toast);
    }
    toast.textContent = text;
  }

  function start() {
    enhance(document);
    for (const deleted of document.querySelectorAll(".memory.deleted[data-undo-until]")) expireUndo(deleted);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
