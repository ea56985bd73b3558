// "Assess risk" measures the tags as saved: while a role selector differs from the saved tags,
// the button is disabled and says why.
(function () {
  const button = document.querySelector("[data-testid=assess]");
  const selects = Array.from(document.querySelectorAll("select[id^=id_col_]"));
  if (!button || !selects.length) return;
  const saved = selects.map((s) => s.value);
  const note = document.createElement("span");
  note.className = "meta";
  note.dataset.testid = "assess-unsaved";
  function update() {
    const changed = selects.some((s, i) => s.value !== saved[i]);
    button.disabled = changed;
    button.title = changed ? "Save the tags first: the assessment uses the saved tags" : "";
    note.textContent = changed ? " Save the tags first: the assessment uses the saved tags." : "";
  }
  button.after(note);
  selects.forEach((s) => s.addEventListener("change", update));
  update();
})();
