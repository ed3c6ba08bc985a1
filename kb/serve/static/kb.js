// Progressive enhancement only: every page works without this file.
// "Copy ... as markdown" buttons copy the text of the <pre> they name (data-copy); without
// JavaScript the same markdown is in the <details> block under them.
"use strict";

function copyText(text) {
  if (navigator.clipboard && window.isSecureContext) {
    return navigator.clipboard.writeText(text);
  }
  // Plain http on a team host is not a secure context: fall back to a selection.
  return new Promise(function (resolve, reject) {
    var area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.className = "offscreen";
    document.body.appendChild(area);
    area.select();
    var ok = document.execCommand("copy");
    document.body.removeChild(area);
    if (ok) { resolve(); } else { reject(new Error("copy refused")); }
  });
}

document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("button.copy[data-copy]").forEach(function (button) {
    var source = document.getElementById(button.getAttribute("data-copy"));
    if (!source) { return; }
    var label = button.textContent;
    button.hidden = false;
    button.addEventListener("click", function () {
      copyText(source.textContent).then(function () {
        button.textContent = "Copied";
      }, function () {
        button.textContent = "Copy failed: open the markdown below";
      }).then(function () {
        window.setTimeout(function () { button.textContent = label; }, 2000);
      });
    });
  });
});
