"""An unbound form's fields are drawn once per shape and kept: the markup is the one Django's
templates draw, and anything that changes it (choices, initial values, labels, a prefix) is
another shape; a bound form is drawn every time, with what was sent."""

import pytest
from django import forms
from django.template import engines

from anonweb.common.charts import builds
from anonweb.common.form_markup import form_fields_html
from anonweb.jobs.plan_views import SuggestForm
from anonweb.releases.views import LinkForm

TEMPLATE = "{% for field in form %}<label>{{ field.label }} {{ field }}</label>{% endfor %}"


def _by_template(form) -> str:
    return engines["django"].from_string(TEMPLATE).render({"form": form})


class Pick(forms.Form):
    colour = forms.ChoiceField(choices=[("r", "Red <b>"), ("g", "Green")], label="Colour & hue")
    size = forms.IntegerField(min_value=1, initial=3)

    def __init__(self, *args, extra=(), **kwargs):
        super().__init__(*args, **kwargs)
        field = self.fields["colour"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = [("r", "Red <b>"), ("g", "Green"), *extra]


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: Pick(), id="plain"),
        pytest.param(lambda: Pick(extra=[("b", "Blue")]), id="more choices"),
        pytest.param(lambda: Pick(initial={"size": 9, "colour": "g"}), id="initial"),
        pytest.param(lambda: Pick(prefix="p"), id="prefix"),
        pytest.param(lambda: LinkForm(formats=["csv", "parquet"]), id="link form"),
        pytest.param(lambda: LinkForm(formats=["csv"]), id="link form, one format"),
        pytest.param(lambda: Pick(data={"colour": "x", "size": "0"}), id="bound"),
    ],
)
def test_the_markup_is_the_templates_first_and_kept(make):
    assert form_fields_html(make()) == _by_template(make())
    # drawn again only when bound
    before = builds["form-fields"]
    assert form_fields_html(make()) == _by_template(make())
    assert builds["form-fields"] == before + (1 if make().is_bound else 0)


def test_each_shape_is_its_own_markup():
    shapes = [
        Pick(),
        Pick(extra=[("b", "Blue")]),
        Pick(initial={"size": 9}),
        Pick(prefix="p"),
        Pick(auto_id="x_%s"),
    ]
    drawn = [str(form_fields_html(f)) for f in shapes]
    assert len(set(drawn)) == len(drawn)
    assert "Red &lt;b&gt;" in drawn[0] and "Colour &amp; hue" in drawn[0]


@pytest.mark.django_db
def test_the_suggestion_forms_of_two_datasets_name_their_own_units(dataset, officer, team):
    """The privacy unit's choices come from the dataset's identifiers: another dataset's kept
    markup is never shown."""
    from anonweb.datasets.services import dataset_create, dataset_set_tags
    from tests.web.conftest import csv_upload, small_table

    frame = small_table().rename(columns={"name": "person"})
    other = dataset_create(user=officer, team=team, upload=csv_upload(frame), name="other")
    other = dataset_set_tags(user=officer, dataset=other, tags={"person": "identifier"})
    one, two = SuggestForm(None, dataset=dataset), SuggestForm(None, dataset=other)
    assert form_fields_html(one) == _by_template(one)
    assert form_fields_html(two) == _by_template(two)
    assert 'value="person"' in form_fields_html(two)
    assert 'value="person"' not in form_fields_html(one)
