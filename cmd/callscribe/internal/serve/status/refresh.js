(function () {
  var main = document.getElementById("sections");
  var note = document.getElementById("refresh-note");
  var every = Number(main.getAttribute("data-refresh-ms")) || 5000;
  function tick() {
    fetch("/status/data", {credentials: "same-origin", cache: "no-store"}).then(function (r) {
      if (r.status === 401) { note.textContent = "signed out: reload to sign in"; return null; }
      if (!r.ok) { note.textContent = "refresh failed (" + r.status + "); retrying"; return null; }
      return r.text();
    }).then(function (html) {
      if (html === null) { return; }
      main.innerHTML = html;
      main.setAttribute("data-refreshes", String(Number(main.getAttribute("data-refreshes") || 0) + 1));
      note.textContent = "";
    }).catch(function () {
      note.textContent = "server unreachable; retrying";
    }).finally(function () { setTimeout(tick, every); });
  }
  setTimeout(tick, every);
})();
