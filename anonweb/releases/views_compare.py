"""The comparison of two versions of a source (``/releases/compare/?a=<id>&b=<id>``)."""

from django.shortcuts import render

from anonweb.releases.compare import display_sections, plan_text, release_comparison
from anonweb.releases.selectors import (
    ReleasesNotComparable,
    release_get_for_user,
    release_versions_for_user,
)


def _id(raw: str | None) -> int | None:
    raw = (raw or "").strip()
    return int(raw) if raw.isdigit() and len(raw) < 18 else None


def release_compare(request):
    a_id, b_id = _id(request.GET.get("a")), _id(request.GET.get("b"))
    only = request.GET.get("differences") == "1"
    context: dict = {"only_differences": only}
    if a_id is None:
        context["error"] = "Choose a release to compare (its page has a “compare with” list)."
        return render(request, "releases/compare.html", context, status=400)
    if b_id is None:
        release = release_get_for_user(user=request.user, release_id=a_id)
        context["release"] = release
        context["versions"] = release_versions_for_user(user=request.user, release=release)
        return render(request, "releases/compare.html", context)
    try:
        result = release_comparison(user=request.user, a_id=a_id, b_id=b_id)
    except ReleasesNotComparable as exc:
        context["error"] = str(exc)
        return render(request, "releases/compare.html", context, status=400)
    context.update(
        {
            "a": result.a,
            "b": result.b,
            "staff": result.staff,
            "sections": display_sections(result.comparison, only_differences=only),
            "differences": result.comparison.differences,
            "plan_a": plan_text(result.a.plan),
            "plan_b": plan_text(result.b.plan),
            "versions": release_versions_for_user(user=request.user, release=result.a),
        }
    )
    return render(request, "releases/compare.html", context)
