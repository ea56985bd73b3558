// Plan builder: a form per column driven by its tag, the hierarchies of the quasi-identifiers,
// the search and the DP statistics, all from the core's declared schemas. The JSON text area
// stays the plan: the forms write it, and typing in it redraws the forms. Each change is sent
// to the server's check (the same schemas), which answers with every problem and the cost.
(function () {
  var data = JSON.parse(document.getElementById("builder-data").textContent);
  var SF = window.SchemaForm, el = SF.el;
  var root = document.getElementById("plan-builder");
  var area = document.getElementById("id_plan");
  if (!root || !area) return;
  var steps = data.schemas.steps, builders = data.schemas.hierarchy_builders;
  var errorsBox = document.getElementById("plan-errors");
  var costBox = document.querySelector("[data-testid=live-cost]");
  var findingsBox = document.querySelector("[data-testid=live-findings]");
  var plan = null, pending = null, seq = 0;
  var open = {};  // which columns' parameters are unfolded, kept across redraws
  var titleInput = document.getElementById("id_title");
  var TITLES = {dp: "Differentially private statistics", k: "k-anonymous extract"};
  var ACTIONS = {
    identifier: ["drop", "tokenize", "substitute", "regex_mask"],
    quasi_identifier: ["microaggregation", "add_noise", "rank_swap", "pram"],
    sensitive: ["drop", "pram", "ldp_randomized_response", "ldp_laplace"],
    other: ["drop"]
  };
  var ACTION_WORDS = {
    keep: "keep as is", drop: "drop the column", tokenize: "tokenize (keyed HMAC)",
    substitute: "substitute from a codebook", regex_mask: "mask with a pattern",
    microaggregation: "microaggregation", add_noise: "add noise", rank_swap: "rank swapping",
    pram: "PRAM", ldp_randomized_response: "local DP: randomized response",
    ldp_laplace: "local DP: Laplace noise"
  };
  var COLUMN_KINDS = {};
  Object.keys(ACTIONS).forEach(function (t) { ACTIONS[t].forEach(function (k) { COLUMN_KINDS[k] = true; }); });

  // δ as anonweb.core.numbers.probability writes it: 2 significant digits, 9.4e-7
  function probability(value) {
    var n = Number(value);
    if (!n || Math.abs(n) >= 1e-3) return String(Number(n.toPrecision(2)));
    return n.toExponential(1).replace(/\.0e/, "e").replace("e+", "e");
  }

  function targets(step) {
    var p = step.params || {};
    if (Array.isArray(p.columns)) return p.columns;
    if (typeof p.column === "string") return [p.column];
    return [];
  }

  function usesColumnList(kind) { return !!(steps[kind] && steps[kind].schema.properties.columns); }

  function stepFor(col) {
    return (plan.steps || []).filter(function (s) { return COLUMN_KINDS[s.kind] && targets(s).indexOf(col) >= 0; })[0];
  }

  function write() {
    area.value = JSON.stringify(plan, null, 2);
    check();
  }

  function setAction(col, kind) {
    open[col] = kind !== "keep";  // a chosen step shows its parameters
    plan.steps = (plan.steps || []).filter(function (s) {
      if (!COLUMN_KINDS[s.kind] || targets(s).indexOf(col) < 0) return true;
      if (Array.isArray(s.params.columns) && s.params.columns.length > 1) {
        s.params.columns = s.params.columns.filter(function (c) { return c !== col; });
        return true;
      }
      return false;
    });
    if (kind !== "keep") {
      var params = usesColumnList(kind) ? {columns: [col]} : {column: col};
      if (kind === "tokenize") params.key = "release-key";
      var step = {kind: kind, params: params};
      var search = plan.steps.findIndex(function (s) { return s.kind === "optimal_generalization" || s.kind === "dp_release"; });
      // a sensitive column's step comes after the search (whose models may read it), the
      // others before it
      var before = tagOf(col) !== "sensitive" ? search : -1;
      if (before >= 0) plan.steps.splice(before, 0, step); else plan.steps.push(step);
    }
    if (tagOf(col) === "quasi_identifier") generalized(col, kind === "keep");
    write();
    render();
  }

  function tagOf(col) {
    var hit = data.columns.filter(function (c) { return c.name === col; })[0];
    return hit ? hit.tag : "other";
  }

  // A quasi-identifier is either generalized by the search, with its hierarchy, or changed by
  // a step of its own: a hierarchy lists the source's values, so not both. Its tag still counts
  // it in the risk after; its hierarchy is kept aside in case it goes back to the search.
  var asideHierarchies = {};
  function generalized(col, yes) {
    var qis = plan.quasi_identifiers = plan.quasi_identifiers || [];
    plan.hierarchies = plan.hierarchies || {};
    var at = qis.indexOf(col);
    if (!yes && at >= 0) {
      qis.splice(at, 1);
      if (plan.hierarchies[col]) asideHierarchies[col] = plan.hierarchies[col];
      delete plan.hierarchies[col];
    } else if (yes && at < 0) {
      var order = data.columns.map(function (c) { return c.name; });
      qis.push(col);
      qis.sort(function (a, b) { return order.indexOf(a) - order.indexOf(b); });
      if (asideHierarchies[col] && !plan.hierarchies[col]) plan.hierarchies[col] = asideHierarchies[col];
    }
  }

  // the columns a step can still name: the table's, less those an earlier step dropped
  function availableAt(step) {
    var gone = {};
    var at = plan.steps.indexOf(step);
    plan.steps.slice(0, at < 0 ? plan.steps.length : at).forEach(function (s) {
      if (s.kind === "drop") targets(s).forEach(function (c) { gone[c] = true; });
    });
    return data.columns.map(function (c) { return c.name; }).filter(function (c) { return !gone[c]; });
  }

  function paramsForm(step, hide, onChange) {
    var schema = steps[step.kind].schema;
    var columns = availableAt(step);
    // hierarchy levels are for the quasi-identifiers still present
    var qis = columns.filter(function (c) { return (plan.quasi_identifiers || []).indexOf(c) >= 0; });
    var form = SF.build(schema, step.params, {columns: columns, keyColumns: qis, hide: hide});
    form.el.addEventListener("input", function () { step.params = form.get(); onChange(); });
    form.el.addEventListener("change", function () { step.params = form.get(); onChange(); });
    return form;
  }

  function columnRow(c) {
    var row = el("div", {"class": "pb-column", "data-testid": "column-" + c.name});
    var head = el("div", {"class": "pb-head"});
    head.appendChild(el("strong", {}, c.name));
    head.appendChild(el("span", {"class": "tag " + c.tag}, c.tag.replace("_", "-")));
    var select = el("select", {"data-testid": "action-" + c.name});
    var choices = ["keep"].concat(ACTIONS[c.tag] || ACTIONS.other);
    choices.forEach(function (k) {
      var word = ACTION_WORDS[k] || k;
      if (c.tag === "quasi_identifier" && k === "keep") word = "generalize (hierarchy, in the search)";
      select.appendChild(el("option", {value: k}, word));
    });
    var step = stepFor(c.name);
    select.value = step ? step.kind : "keep";
    select.addEventListener("change", function () { setAction(c.name, select.value); });
    head.appendChild(select);
    row.appendChild(head);
    // the parameters fold away under the column's line, so the page can be scanned
    var more = el("details", {"class": "pb-more", "data-testid": "more-" + c.name});
    var words = [];
    if (step) {
      var shared = targets(step).filter(function (x) { return x !== c.name; });
      if (shared.length) more.appendChild(el("p", {"class": "meta"}, "One step with: " + shared.join(", ")));
      var hide = usesColumnList(step.kind) ? ["columns"] : ["column"];
      if (Object.keys(steps[step.kind].schema.properties).some(function (p) { return hide.indexOf(p) < 0; })) {
        more.appendChild(paramsForm(step, hide, write).el);
        words.push("parameters");
      }
    }
    if (c.tag === "quasi_identifier" && (plan.quasi_identifiers || []).indexOf(c.name) >= 0) {
      more.appendChild(hierarchyForm(c.name));
      words.push("hierarchy");
    }
    if (words.length) {
      more.insertBefore(el("summary", {}, words.join(" and ")), more.firstChild);
      if (open[c.name]) more.open = true;
      more.addEventListener("toggle", function () { open[c.name] = more.open; });
      row.appendChild(more);
    }
    return row;
  }

  function hierarchyForm(col) {
    plan.hierarchies = plan.hierarchies || {};
    var spec = plan.hierarchies[col];
    var box = el("div", {"class": "pb-hierarchy", "data-testid": "hierarchy-" + col});
    var select = el("select", {"data-testid": "hierarchy-kind-" + col});
    var stored = spec && (spec.uploaded || spec.rows);
    if (stored) select.appendChild(el("option", {value: "stored"}, "the table stored with the dataset"));
    Object.keys(builders).forEach(function (b) { select.appendChild(el("option", {value: b}, builders[b].title || b)); });
    select.value = stored ? "stored" : (spec && spec.builder) || "interval";
    var label = el("label", {}, "Hierarchy ");
    label.appendChild(select);
    box.appendChild(label);
    if (!stored) {
      var value = {};
      Object.keys(spec || {}).forEach(function (k) { if (k !== "builder") value[k] = spec[k]; });
      var form = SF.build(builders[select.value], value, {});
      var update = function () {
        var out = {builder: select.value};
        var got = form.get();
        Object.keys(got).forEach(function (k) { out[k] = got[k]; });
        plan.hierarchies[col] = out;
        write();
      };
      form.el.addEventListener("input", update);
      form.el.addEventListener("change", update);
      box.appendChild(form.el);
    }
    select.addEventListener("change", function () {
      open[col] = true;
      if (select.value !== "stored") plan.hierarchies[col] = {builder: select.value};
      write();
      render();
    });
    return box;
  }

  function describeStep(step) {
    var cols = targets(step);
    var title = (steps[step.kind] && steps[step.kind].schema.title) || step.kind;
    if (step.kind === "dp_release") title += ": " + (step.params.kind || "?");
    return title + (cols.length ? " (" + cols.join(", ") + ")" : "");
  }

  // the steps in the order they run, each movable up or down (buttons: keyboard reachable)
  function orderSection() {
    var box = el("details", {"class": "pb-section", "data-testid": "step-order"});
    box.open = open["(order)"] !== false;
    box.addEventListener("toggle", function () { open["(order)"] = box.open; });
    box.appendChild(el("summary", {}, "Steps, in the order they run (" + plan.steps.length + ")"));
    var list = el("ol", {"class": "pb-order"});
    plan.steps.forEach(function (step, i) {
      var item = el("li", {"data-testid": "order-step-" + (i + 1), "data-kind": step.kind});
      item.appendChild(el("span", {}, describeStep(step) + " "));
      [["up", -1, "↑"], ["down", 1, "↓"]].forEach(function (m) {
        var j = i + m[1];
        var btn = el("button", {type: "button", "class": "link", "data-testid": "step-" + m[0] + "-" + (i + 1),
          "aria-label": "Move step " + (i + 1) + " (" + describeStep(step) + ") " + m[0]}, m[2]);
        btn.disabled = j < 0 || j >= plan.steps.length;
        btn.addEventListener("click", function () {
          plan.steps.splice(i, 1);
          plan.steps.splice(j, 0, step);
          write();
          render();
          var again = document.querySelector("[data-testid=step-" + m[0] + "-" + (j + 1) + "]");
          if (again && !again.disabled) again.focus();
        });
        item.appendChild(btn);
      });
      list.appendChild(item);
    });
    box.appendChild(list);
    return box;
  }

  function searchSection() {
    var box = el("div", {"class": "pb-section", "data-testid": "search-section"});
    var idx = plan.steps.findIndex(function (s) { return s.kind === "optimal_generalization"; });
    var toggle = el("input", {type: "checkbox", "data-testid": "search-on"});
    toggle.checked = idx >= 0;
    var label = el("label", {"class": "sf-check"});
    label.appendChild(toggle);
    label.appendChild(document.createTextNode(" Generalize the quasi-identifiers by the least-loss search (k-anonymity, l-diversity, t-closeness, δ-disclosure)"));
    box.appendChild(label);
    toggle.addEventListener("change", function () {
      if (toggle.checked) {
        var dp = plan.steps.findIndex(function (s) { return s.kind === "dp_release"; });
        var step = {kind: "optimal_generalization", params: {k: 5, suppression: 0.02, metric: "loss", aggregate: "geometric", models: []}};
        if (dp >= 0) plan.steps.splice(dp, 0, step); else plan.steps.push(step);
      } else {
        plan.steps = plan.steps.filter(function (s) { return s.kind !== "optimal_generalization"; });
      }
      write();
      render();
    });
    if (idx >= 0) box.appendChild(paramsForm(plan.steps[idx], [], write).el);
    return box;
  }

  function dpSection() {
    var box = el("div", {"class": "pb-section", "data-testid": "dp-section"});
    plan.steps.forEach(function (step, i) {
      if (step.kind !== "dp_release") return;
      var item = el("div", {"class": "sf-item", "data-testid": "dp-step"});
      item.appendChild(paramsForm(step, [], write).el);
      var rm = el("button", {type: "button", "class": "link"}, "remove this statistic");
      rm.addEventListener("click", function () { plan.steps.splice(plan.steps.indexOf(step), 1); write(); render(); });
      item.appendChild(rm);
      box.appendChild(item);
    });
    var add = el("button", {type: "button", "class": "secondary", "data-testid": "dp-add"}, "Add a DP statistic");
    add.addEventListener("click", function () {
      plan.steps.push({kind: "dp_release", params: {kind: "count", epsilon: 0.1}});
      write();
      render();
    });
    box.appendChild(add);
    return box;
  }

  function otherSteps() {
    var box = el("div", {"class": "pb-section"});
    plan.steps.forEach(function (step) {
      if (COLUMN_KINDS[step.kind] || step.kind === "optimal_generalization" || step.kind === "dp_release") return;
      if (!steps[step.kind]) return;
      var item = el("div", {"class": "sf-item"});
      item.appendChild(el("strong", {}, steps[step.kind].schema.title || step.kind));
      item.appendChild(paramsForm(step, [], write).el);
      box.appendChild(item);
    });
    return box.childNodes.length ? box : null;
  }

  function render() {
    root.textContent = "";
    plan.steps = plan.steps || [];
    var dp = plan.steps.some(function (s) { return s.kind === "dp_release" || s.kind === "dp_synthetic"; }) &&
      !plan.steps.some(function (s) { return s.kind === "optimal_generalization"; });
    document.querySelector("[data-testid=builder-title]").textContent =
      dp ? "Differentially private release: statistics, ε and δ" : "k-anonymous release: columns, hierarchies and the search";
    // a title the officer has not written follows the kind of release
    if (titleInput && (titleInput.value === TITLES.dp || titleInput.value === TITLES.k || !titleInput.value)) {
      titleInput.value = dp ? TITLES.dp : TITLES.k;
    }
    root.appendChild(orderSection());
    root.appendChild(el("h3", {}, "Columns"));
    data.columns.forEach(function (c) { root.appendChild(columnRow(c)); });
    if (!dp) {
      root.appendChild(el("h3", {}, "The search"));
      root.appendChild(searchSection());
    }
    root.appendChild(el("h3", {}, "Differentially private statistics"));
    root.appendChild(dpSection());
    if (dp) {
      var again = el("p", {"class": "meta"});
      var link = el("button", {type: "button", "class": "link", "data-testid": "search-back"}, "Add the k-anonymity search instead");
      link.addEventListener("click", function () {
        plan.steps = plan.steps.filter(function (s) { return s.kind !== "dp_release"; });
        plan.steps.push({kind: "optimal_generalization", params: {k: 5, suppression: 0.02, models: []}});
        write();
        render();
      });
      again.appendChild(link);
      root.appendChild(again);
    }
    var others = otherSteps();
    if (others) { root.appendChild(el("h3", {}, "Other steps")); root.appendChild(others); }
  }

  function showCost(answer) {
    costBox.textContent = "";
    if (answer.errors && answer.errors.length) {
      costBox.textContent = "Fix the plan to see its privacy cost.";
      return;
    }
    var t = answer.privacy.total;
    var local = answer.privacy.steps.filter(function (s) { return s.cost && s.cost.local_epsilon; });
    var text = "This plan spends ε = " + t.epsilon.toFixed(4) + (t.delta ? ", δ = " + probability(t.delta) : "") +
      (t.local_epsilon ? "; local DP: ε = " + Number(t.local_epsilon.toFixed(4)) + " per record in total (" +
        local.map(function (s) { return Number(s.cost.local_epsilon.toFixed(4)); }).join(" + ") + ", one per randomized column)" : "") + ".";
    costBox.appendChild(el("p", {"data-testid": "live-cost-total"}, text));
    var budget = answer.budget || {};
    if (budget.problem) {
      costBox.appendChild(el("p", {"class": "error", "data-testid": "live-cost-budget"}, "It cannot run: " + budget.problem + "."));
    } else if (budget.remaining && budget.remaining.epsilon !== null && budget.remaining.epsilon !== undefined &&
               (t.epsilon > 0 || t.local_epsilon > 0 || t.delta > 0)) {
      var r = budget.remaining;
      costBox.appendChild(el("p", {"data-testid": "live-cost-budget"}, "It fits the budget: ε = " +
        Number(r.epsilon).toFixed(4) + (r.delta ? ", δ = " + probability(r.delta) : "") + " remains for this source before it runs."));
    }
    answer.privacy.steps.forEach(function (s) {
      if (!s.preview) return;
      costBox.appendChild(el("p", {}, "Step " + s.step + " (" + s.preview.kind + "): " + s.preview.accuracy));
    });
    (answer.unconfirmed || []).forEach(function (u) { costBox.appendChild(el("p", {"class": "error"}, u)); });
  }

  // the release gate's findings that the plan and the tags decide (the rest are measured on
  // the release itself, after the run)
  function showFindings(answer) {
    if (!findingsBox) return;
    findingsBox.textContent = "";
    if (answer.errors && answer.errors.length) {
      findingsBox.appendChild(el("p", {"class": "meta"}, "Fix the plan to see the release gate's findings."));
      findingsBox.setAttribute("data-state", "unknown");
      return;
    }
    var found = answer.findings || [];
    findingsBox.setAttribute("data-state", found.length ? "findings" : "clear");
    if (!found.length) {
      findingsBox.appendChild(el("p", {"data-testid": "live-findings-clear"},
        "Release gate: nothing found in the plan and the tags. The risk after, free text and conflicts are measured when it runs."));
      return;
    }
    findingsBox.appendChild(el("p", {}, "Release gate, judged from the plan and the tags (a steward cannot approve these without a written justification):"));
    var list = el("ul", {"class": "findings"});
    found.forEach(function (f) {
      var item = el("li", {"class": f.severity === "block" ? "error" : "", "data-code": f.code}, f.message);
      list.appendChild(item);
    });
    findingsBox.appendChild(list);
  }

  function check() {
    clearTimeout(pending);
    pending = setTimeout(function () {
      var mine = ++seq;
      var body;
      try { body = JSON.parse(area.value); } catch (e) {
        SF.showErrors(errorsBox, ["the JSON does not parse: " + e.message]);
        return;
      }
      SF.post(data.check_url, body).then(function (answer) {
        if (mine !== seq) return;
        SF.showErrors(errorsBox, answer.data.errors);
        root.setAttribute("data-checked", answer.data.errors && answer.data.errors.length ? "invalid" : "valid");
        showCost(answer.data);
        showFindings(answer.data);
      });
    }, 250);
  }

  area.addEventListener("input", function () {
    try {
      plan = JSON.parse(area.value);
    } catch (e) {
      SF.showErrors(errorsBox, ["the JSON does not parse: " + e.message]);
      return;
    }
    if (plan && typeof plan === "object") render();
    check();
  });

  try { plan = JSON.parse(area.value); } catch (e) { plan = {version: 1, steps: []}; }
  if (!plan || typeof plan !== "object") plan = {version: 1, steps: []};
  render();
  check();
})();
