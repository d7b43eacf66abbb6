// The person's time zone, so follow-up emails respect their quiet hours from the start.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const field = document.querySelector('input[name="time_zone"]');
  if (field && !field.value) {
    field.value = Intl.DateTimeFormat().resolvedOptions().timeZone || "";
  }
});
