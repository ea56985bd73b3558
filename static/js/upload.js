// Shows how much of the file has been sent while a large upload is under way, and refuses a
// file over the limit before sending a byte. Without JavaScript the form posts as usual.
(function () {
  var form = document.getElementById("upload-form");
  if (!form || !window.XMLHttpRequest || !window.FormData) return;
  var box = document.getElementById("upload-progress");
  var bar = box.querySelector(".bar");
  var meter = box.querySelector("[data-testid=upload-progress]");
  var text = box.querySelector("[data-testid=upload-progress-text]");
  var limit = parseInt(form.dataset.maxBytes, 10);
  function size(n) {
    var units = ["bytes", "KB", "MB", "GB", "TB"], i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (i ? n.toFixed(1) : n) + " " + units[i];
  }
  form.addEventListener("submit", function (event) {
    var input = form.querySelector("input[type=file]");
    var file = input && input.files && input.files[0];
    if (!file) return;  // the server names the missing field
    event.preventDefault();
    if (limit && file.size > limit) {
      text.textContent = file.name + " is " + size(file.size) + ", over the limit of " + size(limit) + ".";
      box.hidden = false;
      return;
    }
    var xhr = new XMLHttpRequest();
    xhr.open("POST", form.action || window.location.href);
    xhr.upload.addEventListener("progress", function (e) {
      if (!e.lengthComputable) return;
      var pct = Math.floor(100 * e.loaded / e.total);
      bar.style.width = pct + "%";
      meter.setAttribute("aria-valuenow", pct);
      text.textContent = "Sending " + file.name + ": " + size(e.loaded) + " of " + size(e.total) + " (" + pct + "%)";
    });
    xhr.addEventListener("load", function () {
      if (xhr.status < 400 && xhr.responseURL && xhr.responseURL !== window.location.href) {
        window.location.assign(xhr.responseURL);  // the dataset's page, where the reading job shows
        return;
      }
      document.open();
      document.write(xhr.responseText);  // the form again, with the reason
      document.close();
    });
    xhr.addEventListener("error", function () {
      text.textContent = "The upload was interrupted; try again.";
    });
    form.querySelectorAll("button").forEach(function (b) { b.disabled = true; });
    box.hidden = false;
    xhr.send(new FormData(form));
  });
})();
