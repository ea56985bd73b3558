"""``{% compare_with release %}``: the "compare with…" list of a release page, and
``{% compare_pick releases %}``: two version lists on a source's page."""

from django import template

from anonweb.releases.selectors import release_versions_for_user

register = template.Library()


@register.inclusion_tag("releases/_compare_with.html", takes_context=True)
def compare_with(context, release):
    user = context["request"].user
    return {"release": release, "versions": release_versions_for_user(user=user, release=release)}


@register.inclusion_tag("releases/_compare_pick.html")
def compare_pick(releases):
    releases = list(releases)
    return {"releases": releases, "b": releases[0] if releases else None}
