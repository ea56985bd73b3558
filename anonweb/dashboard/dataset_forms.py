from typing import cast

from django import forms
from django.utils.html import escape
from django.utils.safestring import mark_safe

from anonweb.accounts.models import Team
from anonweb.datasets.models import ColumnRole


class UploadForm(forms.Form):
    team = forms.ModelChoiceField(queryset=Team.objects.none())
    name = forms.CharField(max_length=200)
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    file = forms.FileField(help_text="CSV, TSV, Excel (.xlsx) or Parquet")
    separator = forms.ChoiceField(
        required=False,
        choices=[
            ("", "Detect"),
            (",", "Comma ,"),
            (";", "Semicolon ;"),
            ("\t", "Tab"),
            ("|", "Pipe |"),
        ],
    )
    decimal = forms.ChoiceField(
        required=False,
        label="Decimal mark",
        choices=[(".", "Point 1.5"), (",", "Comma 1,5")],
        help_text="Text files: how numbers write their decimals",
    )
    sheet = forms.CharField(
        required=False,
        max_length=255,
        help_text="Excel: the sheet to read, needed when the workbook has several",
    )

    def __init__(self, *args, teams, **kwargs):
        super().__init__(*args, **kwargs)
        cast(forms.ModelChoiceField, self.fields["team"]).queryset = teams
        if teams.count() == 1:
            self.fields["team"].initial = teams.first()


class TagForm(forms.Form):
    """One role selector per column."""

    def __init__(self, *args, dataset, **kwargs):
        super().__init__(*args, **kwargs)
        self.dataset = dataset
        for i, col in enumerate(dataset.columns):
            self.fields[f"col_{i}"] = forms.ChoiceField(
                label=col["name"],
                choices=[("", "— not tagged —"), *ColumnRole.choices],
                initial=dataset.tags.get(col["name"], ""),
                required=False,
            )

    def tags(self) -> dict[str, str]:
        return {
            col["name"]: self.cleaned_data[f"col_{i}"] for i, col in enumerate(self.dataset.columns)
        }

    def rows(self):
        """Each column with its selector. An unbound form (every GET of the dataset page) draws
        its selectors directly: Django's widget templates cost a millisecond per column, the
        largest part of the page; a bound one (a refused POST) shows what was posted."""
        for i, col in enumerate(self.dataset.columns):
            name = f"col_{i}"
            if self.is_bound:
                yield col, self[name]
            else:
                field = cast(forms.ChoiceField, self.fields[name])
                yield col, _Select(name, field.choices, field.initial)


class _Select:
    """A column's role selector as Django's ``Select`` widget draws it (same name, id, options
    and selection); ``initial`` as a bound field gives it."""

    def __init__(self, name: str, choices, initial: str):
        self.initial = initial
        # every value and label escaped here (format_html per option cost as much as a widget)
        options = "".join(
            f'<option value="{escape(value)}"{" selected" if value == initial else ""}>'
            f"{escape(label)}</option>"
            for value, label in choices
        )
        self._html = mark_safe(  # every part escaped above
            f'<select name="{escape(name)}" id="id_{escape(name)}">{options}</select>'
        )

    def __html__(self) -> str:
        return self._html

    def __str__(self) -> str:
        # a template renders str() of what is not a string: it must come back marked safe
        return self._html
