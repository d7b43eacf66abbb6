// The person's time zone, found from this device and chosen in the menu, so follow-up
// emails keep to their quiet hours and every time they see is theirs from the start.
// Only on the form's first showing: after that the menu holds what the person chose.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const select = document.querySelector("form[data-detect-time-zone] select[name=time_zone]");
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  if (!select || !zone) return;
  if (!Array.from(select.options).some((option) => option.value === zone)) {
    // A name the menu spells differently (an older alias such as Asia/Calcutta): sent as
    // it is, the server reads it as the place it stands for.
    select.add(new Option(zone.replace(/_/g, " "), zone), 1);
  }
  select.value = zone;
});
