// The timeline opens at its newest days (or at the day picked): it scrolls sideways over all time.
"use strict";
(function () {
  const scroller = document.querySelector(".timeline-scroll");
  if (!scroller) return;
  const picked = scroller.querySelector("a.day.picked rect");
  if (picked) {
    const x = Number(picked.getAttribute("x")) || 0;
    scroller.scrollLeft = Math.max(0, x - scroller.clientWidth / 2);
  } else {
    scroller.scrollLeft = scroller.scrollWidth;
  }
})();

// The keyboard search shortcut, on every page: "/" (or Ctrl+K / Cmd+K) puts the cursor in the search
// box, or opens the search page where there is none; Escape leaves the box.
"use strict";
(function () {
  function typing(target) {
    const tag = target && target.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || (target && target.isContentEditable);
  }
  document.addEventListener("keydown", function (event) {
    const box = document.getElementById("q");
    if (event.key === "Escape" && box && document.activeElement === box) {
      box.blur();
      return;
    }
    const slash = event.key === "/" && !event.ctrlKey && !event.metaKey && !event.altKey;
    const k = (event.key === "k" || event.key === "K") && (event.ctrlKey || event.metaKey);
    if (!(slash || k) || (slash && typing(event.target))) return;
    event.preventDefault();
    if (box) {
      box.focus();
      box.select();
    } else {
      window.location.href = "/search";
    }
  });
})();

// Search as you type: the server renders the results (escaped); this only fetches them
// after a pause in typing, swaps them in and keeps the URL in step so it can be shared.
"use strict";
(function () {
  const form = document.getElementById("search");
  const results = document.getElementById("results");
  if (!form || !results) return;
  const DELAY_MS = 250;
  let timer = null;
  let inflight = null;

  function query() {
    const params = new URLSearchParams();
    for (const [key, value] of new FormData(form)) {
      if (value !== "" && !(key === "track" && value === "messages")) params.append(key, value);
    }
    return params.toString();
  }

  async function refresh() {
    const qs = query();
    history.replaceState(null, "", "/search" + (qs ? "?" + qs : ""));
    if (inflight) inflight.abort();
    inflight = new AbortController();
    try {
      const response = await fetch("/search?" + (qs ? qs + "&" : "") + "partial=1", { signal: inflight.signal });
      results.innerHTML = await response.text();
      results.dataset.query = qs;
    } catch (err) {
      if (err.name !== "AbortError") results.textContent = "Search failed: " + err.message;
    }
  }

  function later() {
    clearTimeout(timer);
    timer = setTimeout(refresh, DELAY_MS);
  }

  form.addEventListener("input", later);
  form.addEventListener("change", later);
  form.addEventListener("submit", function (event) {
    event.preventDefault();
    clearTimeout(timer);
    refresh();
  });
})();
