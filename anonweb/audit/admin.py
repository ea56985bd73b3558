from django.contrib import admin

from anonweb.audit.models import AuditEvent


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    list_display = ("id", "created_at", "actor_name", "team", "action", "target_type", "target_id")
    list_filter = ("action", "team")
    search_fields = ("actor_name", "action", "target_id")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
