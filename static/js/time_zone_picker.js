// A search box over each time-zone menu (select[data-time-zone-picker]): typing a city,
// country or region keeps only the places that match and picks the first of them.
// Without JavaScript the menu is a plain select, grouped by region.
"use strict";

(function () {
  function plain(text) {
    // "São Paulo" is found by "sao paulo".
    return text.normalize("NFD").replace(/[\u0300-\u036f]/g, "").replace(/_/g, " ").toLowerCase();
  }

  function enhance(select) {
    if (select.dataset.pickerReady) return;
    select.dataset.pickerReady = "true";
    const search = document.createElement("input");
    search.type = "search";
    search.id = `${select.id}_search`;
    search.className = "time-zone-search";
    search.placeholder = "Search: city, country or region";
    search.autocomplete = "off";
    search.setAttribute("aria-label", "Search time zones");
    search.setAttribute("aria-controls", select.id);
    const status = document.createElement("p");
    status.className = "visually-hidden";
    status.setAttribute("role", "status");
    select.before(search);
    select.after(status);

    const options = Array.from(select.options, (option) => ({
      option,
      text: plain(`${option.value} ${option.text} ${option.parentElement.label || ""}`),
    }));

    search.addEventListener("input", () => {
      const words = plain(search.value).split(/\s+/).filter(Boolean);
      const matches = options.filter(({ text }) => words.every((word) => text.includes(word)));
      for (const { option } of options) option.hidden = !matches.some((match) => match.option === option);
      for (const group of select.querySelectorAll("optgroup")) {
        group.hidden = !Array.from(group.children).some((option) => !option.hidden);
      }
      if (!words.length) {
        status.textContent = "";
      } else if (!matches.length) {
        status.textContent = "No time zone matches; the one chosen stays.";
      } else {
        if (select.selectedOptions[0] && select.selectedOptions[0].hidden) select.value = matches[0].option.value;
        status.textContent = `${matches.length} matching; chosen: ${select.selectedOptions[0].text}.`;
      }
    });
    // Enter in the search box picks, it does not send the form half filled in.
    search.addEventListener("keydown", (event) => {
      if (event.key === "Enter") {
        event.preventDefault();
        select.focus();
      }
    });
  }

  function enhanceWithin(root) {
    if (root.matches && root.matches("select[data-time-zone-picker]")) enhance(root);
    for (const select of root.querySelectorAll("select[data-time-zone-picker]")) enhance(select);
  }

  document.addEventListener("DOMContentLoaded", () => enhanceWithin(document));
  // The account page's preferences come back from htmx after each save.
  document.addEventListener("htmx:load", (event) => enhanceWithin(event.detail.elt));
})();
