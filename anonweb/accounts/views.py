from django.contrib import messages
from django.shortcuts import redirect, render

from anonweb.accounts.models import ApiToken, Membership
from anonweb.accounts.services import api_token_create, api_token_revoke


def profile(request):
    """The user's teams and roles, and their API token (create, replace, revoke)."""
    new_key = None
    if request.method == "POST":
        action = request.POST.get("action")
        if action == "create":
            new_key = api_token_create(user=request.user)
        elif action == "revoke":
            if api_token_revoke(user=request.user):
                messages.success(request, "API token revoked; scripts using it are refused now.")
            else:
                messages.info(request, "You had no API token.")
            return redirect("profile")
        else:
            messages.error(request, "Choose to create or revoke a token.")
            return redirect("profile")
    token = ApiToken.objects.filter(user=request.user).only("created").first()
    return render(
        request,
        "accounts/profile.html",
        {
            "memberships": Membership.objects.filter(user=request.user).select_related("team"),
            "token": token,
            "new_key": new_key,
        },
    )
