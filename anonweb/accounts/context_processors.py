from django.core.signals import setting_changed
from django.dispatch import receiver
from django.templatetags.static import static
from django.urls import get_script_prefix, get_urlconf, reverse

from anonweb.accounts.models import Role
from anonweb.accounts.selectors import all_roles

# The addresses base.html links on every page (its menu, style sheet and icon): found once per
# script prefix and URL configuration instead of on every page (a reverse or a static file's
# name costs about what a short query's compilation does, and every page has eleven).
LINKS = {
    "home": "home",
    "datasets": "datasets:list",
    "jobs": "jobs:list",
    "releases": "releases:list",
    "policy": "releases:policy",
    "audit": "audit:list",
    "admin": "admin:index",
    "profile": "profile",
    "logout": "logout",
}
STATIC = {"css": "css/app.css", "favicon": "favicon.svg"}
_found: dict[tuple[str, object], dict[str, str]] = {}


def base_links() -> dict[str, str]:
    key = (get_script_prefix(), get_urlconf())
    links = _found.get(key)
    if links is None:
        links = {name: reverse(view) for name, view in LINKS.items()}
        links.update((name, static(path)) for name, path in STATIC.items())
        _found[key] = links
    return links


@receiver(setting_changed)
def _forget_found(**kwargs):
    # the URLs, static files' storage or their prefix may be others now (tests change them)
    _found.clear()


def roles(request):
    user = getattr(request, "user", None)
    mine = all_roles(user=user) if user is not None else set()
    return {
        "my_roles": mine,
        "is_privacy_officer": Role.PRIVACY_OFFICER in mine,
        "is_data_steward": Role.DATA_STEWARD in mine,
        "is_analyst": Role.ANALYST in mine,
        "base_links": base_links(),
    }
