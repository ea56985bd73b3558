// The search's alternatives: a click on a point of the scatter (or a "make a plan" link) opens
// the plan page with that node's levels fixed.
(function () {
  var box = document.querySelector("[data-testid=alternatives]");
  if (!box) return;
  var alternatives = JSON.parse(document.getElementById("alternatives-data").textContent);
  function go(levels) {
    window.location = box.dataset.planUrl + encodeURIComponent(JSON.stringify(levels));
  }
  box.querySelectorAll("a.alternative").forEach(function (a) {
    a.addEventListener("click", function (e) {
      e.preventDefault();
      go(alternatives[Number(a.dataset.index)].levels);
    });
  });
  var plot = document.getElementById("chart-alternatives");
  function hook() {
    if (!plot || !plot.on) return false;
    plot.on("plotly_click", function (ev) {
      var p = ev.points && ev.points[0];
      if (p && p.customdata) go(JSON.parse(p.customdata));
    });
    return true;
  }
  if (!hook()) window.addEventListener("load", hook);
})();
