"""Every template's ``{% url %}`` gives what Django's own tag gives, with its reversals kept."""

from __future__ import annotations

import pytest
from django.template import engines
from django.test import RequestFactory
from django.urls import NoReverseMatch, reverse, set_script_prefix

from anonweb.common.templatetags.kept_urls import KeptURLNode, _reverse


def render(source: str, **context) -> str:
    return engines["django"].from_string(source).render(context)


def test_every_template_uses_the_kept_tag():
    template = engines["django"].from_string("{% url 'home' %}")
    assert isinstance(template.template.nodelist[0], KeptURLNode)


@pytest.mark.parametrize(
    ("source", "context", "view", "args", "kwargs"),
    [
        ("{% url 'home' %}", {}, "home", [], {}),
        ("{% url 'jobs:detail' j %}", {"j": 7}, "jobs:detail", [7], {}),
        ("{% url 'jobs:detail' '8' %}", {}, "jobs:detail", ["8"], {}),
        ("{% url 'jobs:detail' job_id=j %}", {"j": 9}, "jobs:detail", [], {"job_id": 9}),
        ("{% url name j %}", {"name": "releases:detail", "j": 3}, "releases:detail", [3], {}),
    ],
)
def test_it_reverses_as_django_does(source, context, view, args, kwargs):
    _reverse.cache_clear()
    expected = reverse(view, args=args, kwargs=kwargs)
    assert render(source, **context) == expected
    assert render(source, **context) == expected  # kept
    assert _reverse.cache_info().hits >= 1


def test_different_arguments_are_different_links():
    assert render("{% url 'jobs:detail' 1 %}") == reverse("jobs:detail", args=[1])
    assert render("{% url 'jobs:detail' 2 %}") == reverse("jobs:detail", args=[2])
    assert render("{% url 'jobs:detail' job_id=1 %}") != render("{% url 'jobs:detail' job_id=2 %}")


def test_the_script_prefix_is_part_of_the_link():
    assert render("{% url 'profile' %}") == "/accounts/profile/"
    try:
        set_script_prefix("/app/")
        assert render("{% url 'profile' %}") == "/app/accounts/profile/"
    finally:
        set_script_prefix("/")
    assert render("{% url 'profile' %}") == "/accounts/profile/"


def test_an_object_is_reversed_by_its_text_of_now():
    class Changing:
        text = "5"

        def __str__(self):
            return self.text

    thing = Changing()
    assert render("{% url 'jobs:detail' t %}", t=thing) == "/jobs/5/"
    thing.text = "6"
    assert render("{% url 'jobs:detail' t %}", t=thing) == "/jobs/6/"


def test_true_is_not_one():
    with pytest.raises(NoReverseMatch):
        render("{% url 'jobs:detail' t %}", t=True)
    assert render("{% url 'jobs:detail' 1 %}") == "/jobs/1/"


def test_a_missing_view_fails_or_leaves_the_variable_empty():
    with pytest.raises(NoReverseMatch):
        render("{% url 'no-such-view' %}")
    assert render("{% url 'no-such-view' as u %}[{{ u }}]") == "[]"
    assert render("{% url 'home' as u %}[{{ u }}]") == "[/]"


def test_the_current_application_is_part_of_the_link():
    request = RequestFactory().get("/")
    request.current_app = "admin"
    template = engines["django"].from_string("{% url 'admin:index' %}")
    assert template.render({}, request) == reverse("admin:index", current_app="admin")


def test_a_changed_setting_forgets_them(settings):
    render("{% url 'home' %}")
    assert _reverse.cache_info().currsize >= 1
    settings.STATIC_URL = "/elsewhere/"
    assert _reverse.cache_info().currsize == 0
