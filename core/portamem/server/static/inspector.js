// The inspector's little script: local times, filters that apply on change, a question before a forget.
// It never builds markup from text: the server escaped every value already.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  for (const t of document.querySelectorAll("time[datetime]")) {
    const d = new Date(t.getAttribute("datetime"));
    if (!Number.isNaN(d.getTime())) {
      t.textContent = d.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
    }
  }
  for (const s of document.querySelectorAll("select[data-autosubmit]")) {
    s.addEventListener("change", () => s.form && s.form.requestSubmit());
  }
  for (const f of document.querySelectorAll("form[data-confirm]")) {
    f.addEventListener("submit", (ev) => {
      if (!window.confirm(f.dataset.confirm)) ev.preventDefault();
    });
  }
});
