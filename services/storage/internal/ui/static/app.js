// rolloutmesh viewer: overlays that follow the screenshot's pixels, zoom,
// keyboard navigation between steps, lazy accessibility trees and live
// refresh of running rollouts. No dependencies, nothing inline (the pages'
// Content-Security-Policy allows scripts from this file only).
(function () {
  "use strict";

  // The overlay's viewBox is the original screenshot's size: a thumbnail
  // is the original shrunk by data-scale, so markers stored in original
  // pixels land on the right pixel at any displayed size.
  function fitOverlay(fig) {
    var img = fig.querySelector("img");
    var svg = fig.querySelector("svg.overlay");
    if (!img || !svg || !img.naturalWidth) return;
    var scale = Number(img.dataset.cur || fig.dataset.scale || 1);
    var w = img.naturalWidth * scale, h = img.naturalHeight * scale;
    svg.setAttribute("viewBox", "0 0 " + w + " " + h);
    var r = Math.max(w, h) / 110;
    svg.querySelectorAll("circle.marker").forEach(function (c) {
      c.setAttribute("r", c.classList.contains("from") ? r * 0.6 : r);
    });
    var size = Math.max(w, h) / 55, free = 0, at = {};
    svg.querySelectorAll("text.marker-label").forEach(function (t) {
      t.setAttribute("font-size", size);
      if (t.dataset.hasPoint === "true") {
        // Labels at one point (a click, then the text typed and the keys
        // pressed there) stack a line each instead of overprinting.
        var key = t.getAttribute("x") + "," + t.getAttribute("y");
        var n = at[key] || 0;
        at[key] = n + 1;
        t.setAttribute("dx", r * 1.4);
        t.setAttribute("dy", -r * 1.4 + n * size * 1.3);
      } else {
        // Text typed with no known pointer: one line each, top left.
        t.setAttribute("x", w / 60);
        t.setAttribute("y", h / 30 + size * (1 + 1.3 * free++));
      }
    });
    fig.classList.add("fitted");
  }

  function setupShots() {
    document.querySelectorAll("figure.shot").forEach(function (fig) {
      var img = fig.querySelector("img");
      if (!img) return;
      img.dataset.cur = fig.dataset.scale || "1";
      if (img.complete && img.naturalWidth) fitOverlay(fig);
      img.addEventListener("load", function () { fitOverlay(fig); });
      fig.addEventListener("click", function () { toggleZoom(fig); });
    });
  }

  function toggleZoom(fig) {
    var img = fig.querySelector("img");
    var zoomed = fig.classList.toggle("zoomed");
    img.dataset.cur = zoomed ? "1" : (fig.dataset.scale || "1");
    img.src = zoomed ? img.dataset.full : img.dataset.thumb;
  }

  function steps() { return Array.prototype.slice.call(document.querySelectorAll("section.step")); }

  var current = -1;
  function go(i) {
    var list = steps();
    if (!list.length) return;
    i = Math.max(0, Math.min(list.length - 1, i));
    list.forEach(function (s, j) { s.classList.toggle("current", j === i); });
    document.querySelectorAll("#strip a").forEach(function (a, j) { a.classList.toggle("current", j === i); });
    current = i;
    list[i].scrollIntoView({ block: "start" });
    list[i].focus({ preventScroll: true });
    history.replaceState(null, "", "#" + list[i].id);
  }

  function setupKeys() {
    if (!steps().length) return;
    var m = /^#step-(\d+)$/.exec(location.hash);
    if (m) {
      var idx = steps().findIndex(function (s) { return s.dataset.index === m[1]; });
      if (idx >= 0) go(idx);
    }
    document.addEventListener("keydown", function (e) {
      if (e.target.closest && e.target.closest("input, select, textarea")) return;
      if (e.altKey || e.ctrlKey || e.metaKey) return;
      if (e.key === "ArrowRight" || e.key === "j") { go(current + 1); e.preventDefault(); }
      else if (e.key === "ArrowLeft" || e.key === "k") { go(current - 1); e.preventDefault(); }
      else if (e.key === "Escape") {
        document.querySelectorAll("figure.zoomed").forEach(toggleZoom);
      }
    });
    document.querySelectorAll("#strip a").forEach(function (a, j) {
      a.addEventListener("click", function (e) { e.preventDefault(); go(j); });
    });
  }

  // Accessibility trees can be megabytes: fetched when opened, shown as text.
  function setupTrees() {
    document.querySelectorAll("details.a11y").forEach(function (d) {
      d.addEventListener("toggle", function () {
        if (!d.open || d.dataset.loaded) return;
        d.dataset.loaded = "1";
        fetch(d.dataset.src, { credentials: "same-origin" })
          .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
          .then(function (t) { d.querySelector("pre").textContent = t; })
          .catch(function (e) { d.querySelector("pre").textContent = "could not load: " + e; });
      });
    });
  }

  function setupBars(root) {
    (root || document).querySelectorAll(".bar span[data-width]").forEach(function (s) {
      s.style.width = s.dataset.width;
    });
  }

  // Live pages refetch themselves and swap their [data-live-part]
  // elements; the rest (forms, scroll position) stays.
  function setupLive() {
    var secs = Number(document.body.dataset.live || 0);
    if (!secs) return;
    var timer = setInterval(function () {
      if (document.hidden) return;
      fetch(location.href, { credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
        .then(function (html) {
          var doc = new DOMParser().parseFromString(html, "text/html");
          document.querySelectorAll("[data-live-part]").forEach(function (el) {
            var fresh = doc.getElementById(el.id);
            if (fresh) { el.replaceWith(fresh); setupBars(fresh); }
          });
          if (!doc.body.dataset.live) clearInterval(timer);
        })
        .catch(function () {});
    }, secs * 1000);
  }

  document.addEventListener("DOMContentLoaded", function () {
    setupBars();
    setupShots();
    setupKeys();
    setupTrees();
    setupLive();
  });
})();
