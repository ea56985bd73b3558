"""``{% compare_pick releases %}``: two version lists on a source's page. (A release page's
"compare with…" list is ``releases/_compare_with.html`` with the versions its view read.)"""

from django import template

register = template.Library()


@register.inclusion_tag("releases/_compare_pick.html")
def compare_pick(releases):
    releases = list(releases)
    return {"releases": releases, "b": releases[0] if releases else None}
