// Hierarchy wizard: a form per builder (from its declared schema), previewed as it is typed.
(function () {
  var data = JSON.parse(document.getElementById("wizard-data").textContent);
  var SF = window.SchemaForm, el = SF.el;
  var fields = document.getElementById("builder-fields");
  var upload = document.getElementById("upload-field");
  var orderBox = document.getElementById("order-field");
  var order = document.getElementById("order");
  var errors = document.getElementById("spec-errors");
  var coverage = document.querySelector("[data-testid=coverage]");
  var preview = document.getElementById("preview");
  var form = null, kind = null, rows = null, pending = null, seq = 0;

  function builderOf(k) { return k === "categories" ? "grouping" : k; }

  function choose(k, start) {
    kind = k;
    fields.textContent = "";
    upload.hidden = k !== "upload";
    orderBox.hidden = k !== "categories";
    form = null;
    if (k !== "upload") {
      var schema = data.schemas[builderOf(k)];
      var value = {};
      if (start && start.builder === builderOf(k)) {
        Object.keys(start).forEach(function (key) { if (key !== "builder") value[key] = start[key]; });
      }
      if (k === "categories") {
        schema = JSON.parse(JSON.stringify(schema));
        delete schema.properties.order;
        order.value = (value.order || data.values).join("\n");
        delete value.order;
        if (value.group_size === undefined) value.group_size = 2;
      }
      if (k === "grouping" && value.group_size === undefined) value.group_size = 2;
      if (k === "interval" && value.width === undefined && value.breaks === undefined) value.width = 10;
      if (schema.description) fields.appendChild(el("p", {"class": "meta"}, schema.description));
      form = SF.build(schema, value, {});
      fields.appendChild(form.el);
    }
    schedule();
  }

  function spec() {
    if (kind === "upload") return rows ? {rows: rows} : null;
    var s = form ? form.get() : {};
    var out = {builder: builderOf(kind)};
    Object.keys(s).forEach(function (k) { out[k] = s[k]; });
    if (kind === "categories") {
      out.order = order.value.split("\n").map(function (v) { return v.trim(); }).filter(function (v) { return v !== ""; });
    }
    return out;
  }

  function table(level) {
    var t = el("table", {"class": "grid small", "data-testid": "level-" + level.level});
    var head = el("tr");
    ["Group", "Values", "Records"].forEach(function (h) { head.appendChild(el("th", {}, h)); });
    t.appendChild(el("thead")).appendChild(head);
    var body = el("tbody");
    level.listed.forEach(function (g) {
      var tr = el("tr");
      [g.label, g.values, g.records].forEach(function (v) { tr.appendChild(el("td", {}, String(v))); });
      body.appendChild(tr);
    });
    t.appendChild(body);
    return t;
  }

  function show(p) {
    preview.textContent = "";
    var summary = el("table", {"class": "grid", "data-testid": "levels"});
    var head = el("tr");
    ["Level", "Example", "Groups", "Smallest group (records)", "Largest"].forEach(function (h) { head.appendChild(el("th", {}, h)); });
    summary.appendChild(el("thead")).appendChild(head);
    var body = el("tbody");
    p.levels.forEach(function (lv) {
      var tr = el("tr");
      [lv.level, lv.example, lv.groups, lv.smallest, lv.largest].forEach(function (v) { tr.appendChild(el("td", {}, String(v))); });
      body.appendChild(tr);
    });
    summary.appendChild(body);
    preview.appendChild(summary);
    p.levels.forEach(function (lv) {
      var d = el("details");
      d.appendChild(el("summary", {}, "Level " + lv.level + ": " + lv.groups + " groups (the " + lv.listed.length + " smallest listed)"));
      d.appendChild(table(lv));
      preview.appendChild(d);
    });
    if (p.covered) {
      coverage.textContent = "Every value of the column is covered (" + p.height + " levels" +
        (p.missing_records ? "; " + p.missing_records + " records have no value and stay missing below *" : "") + ").";
      coverage.className = "meta ok";
    } else {
      coverage.textContent = p.uncovered_values + " values (" + p.uncovered_records + " records) are not covered: " +
        p.uncovered.map(function (u) { return u.value; }).join(", ") + (p.uncovered_values > p.uncovered.length ? ", …" : "");
      coverage.className = "error";
    }
  }

  function ask() {
    var s = spec();
    document.getElementById("spec").value = s ? JSON.stringify(s) : "";
    if (!s) { SF.showErrors(errors, ["choose a file"]); return; }
    var mine = ++seq;
    SF.post(data.preview_url, s).then(function (answer) {
      if (mine !== seq) return;
      if (!answer.ok) {
        SF.showErrors(errors, answer.data.errors || [answer.data.error]);
        return;
      }
      SF.showErrors(errors, []);
      show(answer.data);
    });
  }

  function schedule() {
    clearTimeout(pending);
    pending = setTimeout(ask, 200);
  }

  document.getElementById("hierarchy-form").addEventListener("input", function (e) {
    if (e.target.name === "kind") return;
    schedule();
  });
  document.getElementById("hierarchy-form").addEventListener("change", function (e) {
    if (e.target.name === "kind") choose(e.target.value, data.start);
    else schedule();
  });
  document.getElementById("hierarchy-form").addEventListener("submit", function () {
    var s = spec();
    document.getElementById("spec").value = s ? JSON.stringify(s) : "";
  });
  document.getElementById("upload-file").addEventListener("change", function (e) {
    var file = e.target.files[0];
    if (!file) return;
    file.text().then(function (text) {
      var lines = text.replace(/^\ufeff/, "").split(/\r?\n/).filter(function (l) { return l.trim() !== ""; });
      var sep = text.indexOf(";") >= 0 ? ";" : (text.indexOf("\t") >= 0 ? "\t" : ",");
      rows = lines.map(function (l) { return l.split(sep); });
      schedule();
    });
  });

  var start = data.start || {};
  var first = start.rows ? "upload" : (start.builder === "grouping" && start.order ? "categories" : (start.builder || (data.numeric ? "interval" : "grouping")));
  if (first === "upload" && start.rows) rows = start.rows;
  var radio = document.querySelector("input[name=kind][value=" + first + "]");
  if (radio) radio.checked = true;
  choose(first, start);
})();
