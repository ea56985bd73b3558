// Forms built from the JSON Schemas the core declares (step kinds, hierarchy builders, privacy
// models): one schema for the form and for the server's validation. A field's label is its
// declared title (its name when it has none), with the schema's one-line description as help.
// A field whose schema says "x-when": {"kind": ["sum", "mean"]} is shown (and sent) only while
// its sibling "kind" holds one of those values; one marked "x-advanced" goes under "More options". SchemaForm.build(schema, value, options) returns
// {el, get}; get() gives the value as typed, leaving out empty optional fields, so that the
// server's check of the same schema can say what is wrong, field by field.
(function () {
  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (attrs[k] !== undefined && attrs[k] !== null) node.setAttribute(k, attrs[k]);
    });
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function kind(schema) {
    if (!schema) return "json";
    if (schema["x-discriminator"] && schema.oneOf) return "variants";
    if (schema.anyOf) return "any";
    if (schema.enum) return "enum";
    var t = schema.type;
    if (t === "object" && schema.properties) return "object";
    if (t === "object" && schema.additionalProperties && schema["x-keys"]) return "mapping";
    if (t === "object" && schema.additionalProperties && kind(schema.additionalProperties) === "pairs") return "matrix";
    if (t === "object" && schema.additionalProperties && scalarValues(schema.additionalProperties)) return "pairs";
    if (t === "array" && schema.items && schema.items["x-column"]) return "columns";
    if (t === "array" && schema.items && schema.items.type === "object") return "list";
    if (t === "array" && schema.items && (schema.items.type === "number" || schema.items.type === "integer")) return "numbers";
    if (t === "array" && schema.items && (schema.items.type === "string" || schema.items.anyOf || schema.items.oneOf)) return "texts";
    if (t === "string" && schema["x-column"]) return "column";
    if (t === "integer" || t === "number" || t === "string" || t === "boolean") return t;
    return "json";
  }

  var uid = 0;

  function has(v) { return v !== undefined && v !== null && v !== ""; }

  // a value that is a number, a text or null (or one of those): a codebook's replacement
  function scalarValues(schema) {
    var alts = schema.anyOf || schema.oneOf || [schema];
    return alts.every(function (a) { return ["number", "integer", "string", "null"].indexOf(a.type) >= 0; });
  }

  function allows(schema, type) {
    return (schema.anyOf || schema.oneOf || [schema]).some(function (a) {
      return a.type === type || (type === "number" && a.type === "integer");
    });
  }

  // a typed cell: a number where the schema allows one, blank as null where it allows that
  function cellValue(schema, text) {
    if (text.trim() === "") return allows(schema, "null") ? null : undefined;
    if (allows(schema, "number") && !allows(schema, "string")) {
      var n = Number(text);
      return isNaN(n) ? text : n;
    }
    return text;
  }

  function scalar(schema, value, opts, name) {
    var k = kind(schema);
    var input;
    if (k === "boolean") {
      input = el("select", {name: name});
      [["", "(default)"], ["true", "yes"], ["false", "no"]].forEach(function (o) {
        input.appendChild(el("option", {value: o[0]}, o[1]));
      });
      input.value = value === true ? "true" : value === false ? "false" : "";
      return {el: input, get: function () { return input.value === "" ? undefined : input.value === "true"; }};
    }
    if (k === "enum" || k === "column") {
      var choices = k === "enum" ? schema.enum : (opts.columns || []);
      input = el("select", {name: name});
      input.appendChild(el("option", {value: ""}, "—"));
      choices.forEach(function (c) { input.appendChild(el("option", {value: String(c)}, String(c))); });
      input.value = has(value) ? String(value) : "";
      return {el: input, get: function () {
        if (input.value === "") return undefined;
        var hit = choices.filter(function (c) { return String(c) === input.value; })[0];
        return hit === undefined ? input.value : hit;
      }};
    }
    if (k === "integer" || k === "number") {
      input = el("input", {type: "number", name: name, step: k === "integer" ? "1" : "any",
        min: schema.minimum, max: schema.maximum, placeholder: has(schema.default) ? String(schema.default) : ""});
      if (has(value)) input.value = String(value);
      return {el: input, get: function () {
        if (input.value.trim() === "") return input.validity && input.validity.badInput ? input.value : undefined;
        var n = Number(input.value);
        return isNaN(n) ? input.value : n;
      }};
    }
    input = el("input", {type: "text", name: name, placeholder: has(schema.default) ? String(schema.default) : ""});
    if (has(value)) input.value = String(value);
    return {el: input, get: function () { return input.value === "" ? undefined : input.value; }};
  }

  function listOf(schema, value, opts, name, numbers) {
    var input = el("input", {type: "text", name: name, placeholder: "comma-separated"});
    if (Array.isArray(value)) input.value = value.join(", ");
    return {el: input, get: function () {
      if (input.value.trim() === "") return undefined;
      return input.value.split(",").map(function (s) { return s.trim(); }).filter(has).map(function (s) {
        if (!numbers) return s;
        var n = Number(s);
        return isNaN(n) ? s : n;
      });
    }};
  }

  function columnsPicker(schema, value, opts, name) {
    var box = el("span", {"class": "sf-columns", "data-name": name});
    var boxes = [];
    (opts.columns || []).forEach(function (c) {
      var label = el("label", {"class": "sf-check"});
      var cb = el("input", {type: "checkbox", value: c, name: name});
      cb.checked = Array.isArray(value) && value.indexOf(c) >= 0;
      label.appendChild(cb);
      label.appendChild(document.createTextNode(" " + c));
      box.appendChild(label);
      boxes.push(cb);
    });
    return {el: box, get: function () {
      var picked = boxes.filter(function (b) { return b.checked; }).map(function (b) { return b.value; });
      return picked.length ? picked : undefined;
    }};
  }

  function mapping(schema, value, opts, name) {
    var box = el("span", {"class": "sf-mapping"});
    var parts = [];
    (opts.keyColumns || opts.columns || []).forEach(function (c) {
      var label = el("label", {"class": "sf-check"}, c + " ");
      var part = build(schema.additionalProperties, value ? value[c] : undefined, opts, name + "." + c);
      label.appendChild(part.el);
      box.appendChild(label);
      parts.push([c, part]);
    });
    return {el: box, get: function () {
      var out = {}, any = false;
      parts.forEach(function (p) { var v = p[1].get(); if (v !== undefined) { out[p[0]] = v; any = true; } });
      return any ? out : undefined;
    }};
  }

  // key -> value (a codebook): a two-column table, one row per entry
  function pairs(schema, value, opts, name) {
    var box = el("div", {"class": "sf-pairs", "data-name": name});
    var table = el("table", {"class": "kv sf-table"});
    var head = el("tr");
    head.appendChild(el("th", {}, "value"));
    head.appendChild(el("th", {}, "replaced by"));
    head.appendChild(el("th"));
    table.appendChild(head);
    box.appendChild(table);
    var rows = [];
    function push(k, v) {
      var tr = el("tr");
      var key = el("input", {type: "text", name: name + ".key", "aria-label": "value"});
      var val = el("input", {type: "text", name: name + ".value", "aria-label": "replaced by"});
      if (k !== undefined) key.value = k;
      if (v !== undefined && v !== null) val.value = String(v);
      var rm = el("button", {type: "button", "class": "link"}, "remove");
      [key, val, rm].forEach(function (n) { var td = el("td"); td.appendChild(n); tr.appendChild(td); });
      table.appendChild(tr);
      var row = {tr: tr, key: key, val: val};
      rows.push(row);
      rm.addEventListener("click", function () {
        rows.splice(rows.indexOf(row), 1);
        tr.remove();
        box.dispatchEvent(new Event("input", {bubbles: true}));
      });
      return row;
    }
    Object.keys(value || {}).forEach(function (k) { push(k, value[k]); });
    var add = el("button", {type: "button", "class": "secondary small", "data-testid": "sf-add-" + name}, "Add an entry");
    add.addEventListener("click", function () { push().key.focus(); });
    box.appendChild(add);
    return {el: box, get: function () {
      var out = {}, any = false;
      rows.forEach(function (r) {
        if (r.key.value === "") return;
        var v = cellValue(schema.additionalProperties, r.val.value);
        out[r.key.value] = v === undefined ? "" : v;
        any = true;
      });
      return any ? out : undefined;
    }};
  }

  // category -> {category: probability} (a PRAM transition matrix): the categories once, then
  // a square table of probabilities with each row's sum beside it
  function matrix(schema, value, opts, name) {
    var cellSchema = schema.additionalProperties.additionalProperties;
    var box = el("div", {"class": "sf-matrix", "data-name": name});
    var given = value && typeof value === "object" && !Array.isArray(value) ? value : {};
    var keys = Object.keys(given);
    keys.forEach(function (k) {
      Object.keys(given[k] || {}).forEach(function (t) { if (keys.indexOf(t) < 0) keys.push(t); });
    });
    var catsLabel = el("label", {}, "Categories ");
    var cats = el("input", {type: "text", name: name + ".categories", placeholder: "comma-separated",
      "data-testid": "sf-categories-" + name});
    cats.value = keys.join(", ");
    catsLabel.appendChild(cats);
    box.appendChild(catsLabel);
    var fill = el("span", {"class": "sf-fill"});
    var p = el("input", {type: "number", step: "any", min: "0", max: "1", placeholder: "0.8",
      "aria-label": "probability of keeping a value", "data-testid": "sf-keep-" + name});
    var fillBtn = el("button", {type: "button", "class": "secondary small", "data-testid": "sf-fill-" + name},
      "Fill: keep each value with this probability, the rest spread evenly");
    fill.appendChild(p);
    fill.appendChild(fillBtn);
    box.appendChild(fill);
    var holder = el("div");
    box.appendChild(holder);
    var cells = [], sums = [], order = [];
    function categories() {
      var seen = [];
      cats.value.split(",").map(function (s) { return s.trim(); }).forEach(function (c) {
        if (c !== "" && seen.indexOf(c) < 0) seen.push(c);
      });
      return seen;
    }
    function read() {
      var out = {};
      order.forEach(function (from, i) {
        var row = {};
        order.forEach(function (to, j) {
          var v = cellValue(cellSchema, cells[i][j].value);
          if (v !== undefined && v !== null) row[to] = v;
        });
        out[from] = row;
      });
      return out;
    }
    function showSums() {
      cells.forEach(function (row, i) {
        var total = row.reduce(function (acc, c) { var n = Number(c.value); return acc + (isNaN(n) ? 0 : n); }, 0);
        sums[i].textContent = "Σ " + (Math.round(total * 1e6) / 1e6);
        sums[i].className = Math.abs(total - 1) > 1e-9 ? "error" : "";
      });
    }
    function draw(vals) {
      holder.textContent = "";
      order = categories();
      cells = [];
      sums = [];
      if (!order.length) return;
      var table = el("table", {"class": "kv sf-table", "data-testid": "sf-matrix-" + name});
      var head = el("tr");
      head.appendChild(el("th", {}, "from \\ to"));
      order.forEach(function (c) { head.appendChild(el("th", {}, c)); });
      head.appendChild(el("th"));
      table.appendChild(head);
      order.forEach(function (from, i) {
        var tr = el("tr");
        tr.appendChild(el("th", {scope: "row"}, from));
        cells.push([]);
        order.forEach(function (to, j) {
          var input = el("input", {type: "number", step: "any", min: "0", max: "1", "class": "sf-cell",
            name: name + "[" + from + "][" + to + "]", "aria-label": from + " to " + to});
          var v = vals[from] && vals[from][to];
          if (v !== undefined && v !== null) input.value = String(v);
          var td = el("td");
          td.appendChild(input);
          tr.appendChild(td);
          cells[i].push(input);
        });
        var sum = el("td");
        tr.appendChild(sum);
        sums.push(sum);
        table.appendChild(tr);
      });
      holder.appendChild(table);
      showSums();
    }
    draw(given);
    cats.addEventListener("change", function () { draw(read()); box.dispatchEvent(new Event("input", {bubbles: true})); });
    holder.addEventListener("input", showSums);
    fillBtn.addEventListener("click", function () {
      var keep = Number(p.value === "" ? p.placeholder : p.value);
      if (isNaN(keep)) return;
      if (categories().join("\n") !== order.join("\n")) draw(read());
      var n = order.length;
      var other = n > 1 ? (1 - keep) / (n - 1) : 0;
      cells.forEach(function (row, i) {
        row.forEach(function (c, j) {
          c.value = String(n === 1 ? 1 : i === j ? keep : Math.round(other * 1e12) / 1e12);
        });
      });
      showSums();
      box.dispatchEvent(new Event("input", {bubbles: true}));
    });
    return {el: box, get: function () {
      if (!order.length) return undefined;
      return read();
    }};
  }

  function json(schema, value, opts, name) {
    var area = el("textarea", {name: name, rows: "2", "class": "code", placeholder: "JSON"});
    if (value !== undefined) area.value = JSON.stringify(value);
    return {el: area, get: function () {
      if (area.value.trim() === "") return undefined;
      try { return JSON.parse(area.value); } catch (e) { return area.value; }
    }};
  }

  function any(schema, value, opts, name) {
    // a column or a list of columns, numbers or a list of them: a comma-separated list, one
    // entry given alone when the schema allows a single value
    var alts = schema.anyOf;
    var single = alts.filter(function (a) { return a.type !== "array"; })[0];
    var multi = alts.filter(function (a) { return a.type === "array"; })[0];
    var numeric = (single && (single.type === "number" || single.type === "integer")) ||
      (multi && multi.items && (multi.items.type === "number" || multi.items.type === "integer"));
    if (multi && multi.items && multi.items["x-column"]) {
      var picker = columnsPicker(multi, Array.isArray(value) ? value : (has(value) ? [value] : []), opts, name);
      return {el: picker.el, get: function () {
        var v = picker.get();
        return v && v.length === 1 && single ? v[0] : v;
      }};
    }
    var inner = listOf(schema, Array.isArray(value) ? value : (has(value) ? [value] : undefined), opts, name, numeric);
    return {el: inner.el, get: function () {
      var v = inner.get();
      if (v && v.length === 1 && single && !(multi && single.type === "string" && numeric)) return v[0];
      return v;
    }};
  }

  function object(schema, value, opts, name) {
    var box = el("div", {"class": "sf-object"});
    var parts = [];
    value = value || {};
    var required = schema.required || [];
    var rows = {}, more = null;
    Object.keys(schema.properties).forEach(function (prop) {
      if (opts.hide && opts.hide.indexOf(prop) >= 0) return;  // kept as it is, not shown
      var sub = schema.properties[prop];
      var row = el("div", {"class": "sf-field", "data-field": prop});
      var label = el("label", {title: prop}, (sub.title || prop) + (required.indexOf(prop) >= 0 ? " *" : ""));
      var part = build(sub, value[prop], opts, name ? name + "." + prop : prop);
      var field = part.el.matches && part.el.matches("input, select, textarea") ? part.el : null;
      if (field) {
        field.id = field.id || "sf-" + (++uid);
        label.setAttribute("for", field.id);
      }
      row.appendChild(label);
      row.appendChild(part.el);
      if (sub.description) row.appendChild(el("small", {"class": "sf-help"}, sub.description));
      if (sub["x-advanced"]) {
        if (!more) {
          more = el("details", {"class": "sf-more"});
          more.appendChild(el("summary", {}, "More options"));
        }
        more.appendChild(row);
      } else {
        box.appendChild(row);
      }
      parts.push([prop, part]);
      rows[prop] = row;
    });
    function shown(prop) {
      var when = schema.properties[prop]["x-when"];
      if (!when) return true;
      return Object.keys(when).every(function (other) {
        var hit = parts.filter(function (p) { return p[0] === other; })[0];
        var current = hit ? hit[1].get() : value[other];
        return when[other].indexOf(current) >= 0;
      });
    }
    function applyWhen() {
      Object.keys(rows).forEach(function (prop) { rows[prop].style.display = shown(prop) ? "" : "none"; });
    }
    if (more) box.appendChild(more);
    applyWhen();
    box.addEventListener("change", applyWhen);
    // keep what the form does not show (unknown keys), so that nothing typed is lost
    var extra = {};
    Object.keys(value).forEach(function (k) {
      if (!(k in schema.properties) || (opts.hide && opts.hide.indexOf(k) >= 0)) extra[k] = value[k];
    });
    return {el: box, get: function () {
      var out = {};
      Object.keys(extra).forEach(function (k) { out[k] = extra[k]; });
      parts.forEach(function (p) {
        var v = p[1].get();
        if (v !== undefined && shown(p[0])) out[p[0]] = v;
      });
      return out;
    }};
  }

  function variants(schema, value, opts, name) {
    var key = schema["x-discriminator"];
    var box = el("div", {"class": "sf-variants"});
    var select = el("select", {name: name + "." + key});
    var options = schema.oneOf.map(function (v) { return v.properties[key].enum ? v.properties[key].enum[0] : v.properties[key].const; });
    options.forEach(function (o, i) { select.appendChild(el("option", {value: o}, schema.oneOf[i].title || o)); });
    box.appendChild(select);
    var holder = el("div");
    box.appendChild(holder);
    var current = null;
    function show(v) {
      var i = Math.max(0, options.indexOf(select.value));
      var sub = JSON.parse(JSON.stringify(schema.oneOf[i]));
      delete sub.properties[key];
      holder.textContent = "";
      current = object(sub, v, opts, name);
      holder.appendChild(current.el);
    }
    if (value && value[key]) select.value = value[key];
    show(value);
    select.addEventListener("change", function () { show({}); box.dispatchEvent(new Event("input", {bubbles: true})); });
    return {el: box, get: function () {
      var out = current.get();
      var o = {}; o[key] = select.value;
      Object.keys(out).forEach(function (k) { o[k] = out[k]; });
      return o;
    }};
  }

  function list(schema, value, opts, name) {
    var box = el("div", {"class": "sf-list"});
    var items = [];
    var add = el("button", {type: "button", "class": "secondary small", "data-testid": "sf-add-" + name}, "Add");
    function push(v) {
      var row = el("div", {"class": "sf-item"});
      var part = build(schema.items, v, opts, name + "[" + items.length + "]");
      var rm = el("button", {type: "button", "class": "link"}, "remove");
      row.appendChild(part.el);
      row.appendChild(rm);
      box.insertBefore(row, add);
      var entry = {row: row, part: part};
      items.push(entry);
      rm.addEventListener("click", function () {
        items.splice(items.indexOf(entry), 1);
        row.remove();
        box.dispatchEvent(new Event("input", {bubbles: true}));
      });
    }
    box.appendChild(add);
    (value || []).forEach(push);
    add.addEventListener("click", function () { push(undefined); box.dispatchEvent(new Event("input", {bubbles: true})); });
    return {el: box, get: function () {
      if (!items.length) return undefined;
      return items.map(function (e) { return e.part.get(); });
    }};
  }

  function build(schema, value, opts, name) {
    opts = opts || {};
    name = name || "";
    switch (kind(schema)) {
      case "object": return object(schema, value, opts, name);
      case "variants": return variants(schema, value, opts, name);
      case "list": return list(schema, value, opts, name);
      case "columns": return columnsPicker(schema, value, opts, name);
      case "mapping": return mapping(schema, value, opts, name);
      case "matrix": return matrix(schema, value, opts, name);
      case "pairs": return pairs(schema, value, opts, name);
      case "numbers": return listOf(schema, value, opts, name, true);
      case "texts": return listOf(schema, value, opts, name, false);
      case "any": return any(schema, value, opts, name);
      case "json": return json(schema, value, opts, name);
      default: return scalar(schema, value, opts, name);
    }
  }

  function csrf() {
    var input = document.querySelector("input[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  // POST a JSON body, resolve to {ok, data}
  function post(url, body) {
    return fetch(url, {
      method: "POST", credentials: "same-origin",
      headers: {"Content-Type": "application/json", "X-CSRFToken": csrf()},
      body: JSON.stringify(body)
    }).then(function (resp) {
      return resp.json().then(function (data) { return {ok: resp.ok, data: data}; });
    });
  }

  function showErrors(box, errors) {
    box.textContent = "";
    (errors || []).forEach(function (e) { box.appendChild(el("li", {}, e)); });
    box.hidden = !(errors && errors.length);
  }

  window.SchemaForm = {build: build, el: el, post: post, showErrors: showErrors};
})();
