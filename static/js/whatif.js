// What-if sliders: one per quasi-identifier (its hierarchy level) and one for the suppression
// limit. Each change asks the server for the node's figures (no job) and redraws the charts.
(function () {
  var card = document.getElementById("whatif");
  if (!card) return;
  var url = card.dataset.url;
  var csrf = card.querySelector("input[name=csrfmiddlewaretoken]").value;
  var controls = card.querySelector(".whatif-controls");
  var status = card.querySelector("[data-testid=whatif-status]");
  var chartsBox = card.querySelector(".whatif-charts");
  var sliders = {};
  var suppression = null;
  var pending = null;
  var seq = 0;

  function fmt(x, digits) {
    if (x === null || x === undefined) return "—";
    if (typeof x !== "number") return String(x);
    return Number.isInteger(x) ? x.toLocaleString("en") : x.toFixed(digits === undefined ? 4 : digits);
  }

  // the figures of the registry's other models (β-likeness, ...), declared once in the core and
  // given to the page as JSON: key, label, which direction is safer, digits
  var declared = document.getElementById("whatif-model-figures");
  var modelFigures = declared ? JSON.parse(declared.textContent) : [];

  function figure(s, f) {
    if (!(f.key in s)) return "—";
    return s[f.key] === null ? "∞" : fmt(s[f.key], f.digits);
  }

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function build(result) {
    controls.textContent = "";
    Object.keys(result.heights).forEach(function (col) {
      var label = el("label", {"class": "whatif-slider"});
      label.appendChild(el("span", {}, col + " level "));
      var input = el("input", {
        type: "range", min: "0", max: String(result.heights[col] - 1), step: "1", value: "0",
        name: col, "data-testid": "whatif-level-" + col
      });
      var out = el("output", {"data-testid": "whatif-level-value-" + col});
      label.appendChild(input);
      label.appendChild(out);
      controls.appendChild(label);
      sliders[col] = {input: input, out: out};
      input.addEventListener("input", schedule);
    });
    var label = el("label", {"class": "whatif-slider"});
    label.appendChild(el("span", {}, "suppression limit "));
    suppression = el("input", {
      type: "range", min: "0", max: "0.2", step: "0.005", value: "0",
      name: "suppression", "data-testid": "whatif-suppression"
    });
    var out = el("output", {"data-testid": "whatif-suppression-value"});
    label.appendChild(suppression);
    label.appendChild(out);
    controls.appendChild(label);
    sliders.__suppression = {input: suppression, out: out};
    suppression.addEventListener("input", schedule);
    controls.appendChild(status);
  }

  function labels(result) {
    Object.keys(sliders).forEach(function (col) {
      var s = sliders[col];
      if (col === "__suppression") {
        s.out.textContent = (100 * Number(s.input.value)).toFixed(1) + "% (" +
          fmt(result.suppression_limit) + " records)";
        return;
      }
      var lv = Number(s.input.value);
      var names = result.level_names && result.level_names[col];
      s.out.textContent = lv + (names ? " · e.g. " + names[lv] : "");
    });
  }

  function show(data) {
    var r = data.result;
    var set = function (field, value) {
      var dd = card.querySelector("[data-field=" + field + "]");
      if (dd) dd.textContent = value;
    };
    set("k", fmt(r.k));
    set("classes", fmt(r.classes));
    set("suppressed", fmt(r.suppressed) + " of " + fmt(r.total_rows));
    set("prosecutor_max", r.prosecutor_risk ? fmt(r.prosecutor_risk.max) : "—");
    set("prosecutor_mean", r.prosecutor_risk ? fmt(r.prosecutor_risk.mean) : "—");
    set("information_loss", fmt(r.information_loss));
    set("measure", "Information loss: " + r.information_loss_measure + ".");
    var body = card.querySelector("[data-testid=whatif-sensitive] tbody");
    body.textContent = "";
    Object.keys(r.sensitive || {}).forEach(function (name) {
      var s = r.sensitive[name];
      var tr = el("tr");
      [name, fmt(s.l_distinct), fmt(s.l_entropy, 2), fmt(s.t_closeness) + " (" + s.t_distance + ")",
       fmt(s.delta_disclosure, 3)]
        .concat(modelFigures.map(function (f) { return figure(s, f); }))
        .concat([fmt(s.homogeneous_classes) + " (" + fmt(s.homogeneous_records) + " records)"])
        .forEach(function (v) { tr.appendChild(el("td", {}, v)); });
      body.appendChild(tr);
    });
    labels(r);
    charts(data.charts);
  }

  function charts(list) {
    if (!window.Plotly) return;
    list.forEach(function (chart) {
      var id = "whatif-" + chart.id;
      var div = document.getElementById(id);
      if (!div) {
        var fig = el("figure", {"class": "chart"});
        div = el("div", {id: id, "class": "plot"});
        fig.appendChild(div);
        chartsBox.appendChild(fig);
      }
      window.Plotly.react(div, chart.figure.data, chart.figure.layout, {responsive: true, displaylogo: false});
    });
  }

  function body() {
    var levels = {};
    Object.keys(sliders).forEach(function (col) {
      if (col !== "__suppression") levels[col] = Number(sliders[col].input.value);
    });
    return {levels: levels, suppression: suppression ? Number(suppression.value) : 0};
  }

  function ask(method) {
    var mine = ++seq;
    status.textContent = "Computing…";
    card.setAttribute("aria-busy", "true");
    var options = {method: method, headers: {"X-CSRFToken": csrf}, credentials: "same-origin"};
    if (method === "POST") {
      options.headers["Content-Type"] = "application/json";
      options.body = JSON.stringify(body());
    }
    return fetch(url, options).then(function (resp) {
      return resp.json().then(function (data) { return {ok: resp.ok, data: data}; });
    }).then(function (answer) {
      if (mine !== seq) return;  // a later change is on its way
      card.removeAttribute("aria-busy");
      if (!answer.ok) {
        status.textContent = answer.data.error || "The figures could not be computed.";
        return;
      }
      if (!Object.keys(sliders).length) build(answer.data.result);
      status.textContent = "";
      show(answer.data);
    }).catch(function () {
      if (mine === seq) status.textContent = "The server did not answer.";
    });
  }

  function schedule() {
    labels({suppression_limit: "…"});
    clearTimeout(pending);
    pending = setTimeout(function () { ask("POST"); }, 120);
  }

  ask("GET");
})();
