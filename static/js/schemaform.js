// Forms built from the JSON Schemas the core declares (step kinds, hierarchy builders, privacy
// models): one schema for the form and for the server's validation. A field's label is its
// name and the schema's one-line description. SchemaForm.build(schema, value, options) returns
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
    if (t === "array" && schema.items && schema.items["x-column"]) return "columns";
    if (t === "array" && schema.items && schema.items.type === "object") return "list";
    if (t === "array" && schema.items && (schema.items.type === "number" || schema.items.type === "integer")) return "numbers";
    if (t === "array" && schema.items && (schema.items.type === "string" || schema.items.anyOf || schema.items.oneOf)) return "texts";
    if (t === "string" && schema["x-column"]) return "column";
    if (t === "integer" || t === "number" || t === "string" || t === "boolean") return t;
    return "json";
  }

  function has(v) { return v !== undefined && v !== null && v !== ""; }

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
    (opts.columns || []).forEach(function (c) {
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
    Object.keys(schema.properties).forEach(function (prop) {
      if (opts.hide && opts.hide.indexOf(prop) >= 0) return;  // kept as it is, not shown
      var sub = schema.properties[prop];
      var row = el("div", {"class": "sf-field", "data-field": prop});
      var label = el("label", {}, prop + (required.indexOf(prop) >= 0 ? " *" : ""));
      var part = build(sub, value[prop], opts, name ? name + "." + prop : prop);
      row.appendChild(label);
      row.appendChild(part.el);
      if (sub.description) row.appendChild(el("small", {"class": "sf-help"}, sub.description));
      box.appendChild(row);
      parts.push([prop, part]);
    });
    // keep what the form does not show (unknown keys), so that nothing typed is lost
    var extra = {};
    Object.keys(value).forEach(function (k) {
      if (!(k in schema.properties) || (opts.hide && opts.hide.indexOf(k) >= 0)) extra[k] = value[k];
    });
    return {el: box, get: function () {
      var out = {};
      Object.keys(extra).forEach(function (k) { out[k] = extra[k]; });
      parts.forEach(function (p) { var v = p[1].get(); if (v !== undefined) out[p[0]] = v; });
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
