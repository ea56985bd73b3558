"""Teams and memberships in the admin. Every membership change goes through
``anonweb.accounts.services``, so it is audited with the administrator as the actor."""

from django.contrib import admin
from django.contrib.auth.admin import GroupAdmin as DjangoGroupAdmin
from django.contrib.auth.admin import UserAdmin as DjangoUserAdmin
from django.contrib.auth.models import Group, User

from anonweb.accounts.admin_audit import admin_acting
from anonweb.accounts.models import ApiToken, Membership, Team, TeamGroup
from anonweb.accounts.services import (
    membership_grant,
    membership_revoke,
    membership_set_role,
    team_group_create,
    team_group_set_members,
)


def _save_membership(request, obj: Membership, change: bool) -> Membership:
    if not change or obj.pk is None:
        saved = membership_grant(
            actor=request.user, team=obj.team, user=obj.user, role=obj.role, via="admin"
        )
        obj.pk = saved.pk
        return saved
    previous = Membership.objects.get(pk=obj.pk)
    if (previous.team_id, previous.user_id) != (obj.team_id, obj.user_id):
        # Moving a membership to another person or team is a revocation and a grant.
        membership_revoke(actor=request.user, membership=previous, via="admin")
        saved = membership_grant(
            actor=request.user, team=obj.team, user=obj.user, role=obj.role, via="admin"
        )
        obj.pk = saved.pk
        return saved
    return membership_set_role(actor=request.user, membership=obj, role=obj.role, via="admin")


class ActingAdmin(admin.ModelAdmin):
    """Names the administrator as the actor of the account changes its views make (superuser
    and staff status, permissions, groups, passwords, new users, team names): the receivers in
    :mod:`anonweb.accounts.admin_audit` write the events."""

    def changeform_view(self, request, *args, **kwargs):
        with admin_acting(request.user):
            return super().changeform_view(request, *args, **kwargs)

    def changelist_view(self, request, *args, **kwargs):
        with admin_acting(request.user):
            return super().changelist_view(request, *args, **kwargs)

    def delete_view(self, request, *args, **kwargs):
        with admin_acting(request.user):
            return super().delete_view(request, *args, **kwargs)


admin.site.unregister(User)
admin.site.unregister(Group)


@admin.register(User)
class UserAdmin(ActingAdmin, DjangoUserAdmin):
    def user_change_password(self, request, *args, **kwargs):
        with admin_acting(request.user):
            return super().user_change_password(request, *args, **kwargs)


@admin.register(Group)
class GroupAdmin(ActingAdmin, DjangoGroupAdmin):
    """Django's group admin, with the acting administrator named in the audit events."""


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1


@admin.register(Team)
class TeamAdmin(ActingAdmin):
    list_display = ("name", "slug", "created_at")
    prepopulated_fields = {"slug": ("name",)}
    inlines = [MembershipInline]

    def save_formset(self, request, form, formset, change):
        if formset.model is not Membership:
            return super().save_formset(request, form, formset, change)
        memberships = formset.save(commit=False)
        for obj in formset.deleted_objects:
            membership_revoke(actor=request.user, membership=obj, via="admin")
        for obj in memberships:
            obj.team = form.instance
            _save_membership(request, obj, change=obj.pk is not None)
        formset.save_m2m()


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ("user", "team", "role", "created_at")
    list_filter = ("role", "team")

    def save_model(self, request, obj, form, change):
        _save_membership(request, obj, change)

    def delete_model(self, request, obj):
        membership_revoke(actor=request.user, membership=obj, via="admin")

    def delete_queryset(self, request, queryset):
        for obj in queryset:
            membership_revoke(actor=request.user, membership=obj, via="admin")


@admin.register(TeamGroup)
class TeamGroupAdmin(admin.ModelAdmin):
    """Groups a release can name as recipients; created and filled through the services, so
    each change is audited with the administrator as the actor."""

    list_display = ("name", "team", "created_at")
    list_filter = ("team",)
    filter_horizontal = ("members",)

    def get_readonly_fields(self, request, obj=None):
        return ("team", "name") if obj is not None else ()

    def save_model(self, request, obj, form, change):
        if not change:
            created = team_group_create(actor=request.user, team=obj.team, name=obj.name)
            obj.pk = created.pk

    def save_related(self, request, form, formsets, change):
        team_group_set_members(
            actor=request.user, group=form.instance, members=form.cleaned_data["members"]
        )


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens are listed and revoked here; a key is made only by its user (profile page) or
    ``drf_create_token``, which show it once: the table holds its SHA-256."""

    list_display = ("user", "created")
    readonly_fields = ("user", "digest", "created")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
