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

  // New content from htmx: enhance it, and put the cursor where the person will type.
  document.addEventListener("htmx:load", (event) => {
    const element = event.detail.elt;
    enhance(element);
    if (element.matches && element.matches(".memory.editing")) {
      const first = element.querySelector(".has-error textarea, .has-error input, .has-error select")
        || element.querySelector("[name=summary]");
      if (first) first.focus();
    }
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

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", () => enhance(document));
  } else {
    enhance(document);
  }
})();
