// Polls the job's status and updates the progress bar without reloading the page.
(function () {
  var box = document.getElementById("job");
  if (!box || box.dataset.terminal === "1") return;
  var url = box.dataset.statusUrl;
  var bar = box.querySelector(".bar");
  var meter = box.querySelector("[data-testid=progress]");
  var text = box.querySelector("[data-testid=progress-text]");
  var status = box.querySelector("[data-testid=job-status]");
  var message = box.querySelector("[data-testid=job-message]");
  var error = box.querySelector("[data-testid=job-error]");
  function tick() {
    fetch(url, {headers: {"Accept": "application/json"}, credentials: "same-origin"})
      .then(function (r) { return r.json(); })
      .then(function (s) {
        bar.style.width = s.progress + "%";
        meter.setAttribute("aria-valuenow", s.progress);
        text.textContent = s.progress + "%";
        status.textContent = s.status_label;
        status.className = "status " + s.status;
        message.textContent = s.message;
        // The job page shows when and where the job started; the dataset page's reading box does not.
        var started = box.querySelector("[data-testid=job-started]");
        var worker = box.querySelector("[data-testid=job-worker]");
        if (s.started_at && started) started.textContent = s.started_at;
        if (s.worker && worker) worker.textContent = s.worker;
        if (s.error) { error.textContent = s.error; error.hidden = false; }
        if (s.terminal) {
          var cancel = document.getElementById("cancel-form");
          if (cancel) cancel.remove();
          // Reload once so links to results (a release, the dataset's charts) appear.
          window.setTimeout(function () { window.location.reload(); }, 600);
          return;
        }
        window.setTimeout(tick, 700);
      })
      .catch(function () { window.setTimeout(tick, 2000); });
  }
  tick();
})();
