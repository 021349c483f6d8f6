"""The Django admin's page for role grants (beside its users and groups).
Its writes go through jobs.roles, so each is audited like the command's."""

from django.contrib import admin

from jobs import roles
from jobs.models import AuditEvent, RoleGrant


@admin.register(RoleGrant)
class RoleGrantAdmin(admin.ModelAdmin):
    list_display = ["user", "group", "role", "namespace", "source"]
    list_filter = ["role", "namespace", "source"]
    # Saved here, a grant is given by hand (jobs.roles.grant_role).
    readonly_fields = ["source"]
    search_fields = ["user__username", "group__name", "namespace"]

    def save_model(self, request, obj, form, change):
        if change:
            stored = RoleGrant.objects.get(pk=obj.pk)
            if (stored.user_id, stored.group_id, stored.namespace) != (
                obj.user_id,
                obj.group_id,
                obj.namespace,
            ):
                roles.revoke_role(
                    user=stored.user, group=stored.group, namespace=stored.namespace, by=request.user, via=VIA
                )
        grant = roles.grant_role(
            user=obj.user, group=obj.group, role=obj.role, namespace=obj.namespace, by=request.user, via=VIA
        )
        obj.pk = grant.pk

    def delete_model(self, request, obj):
        roles.revoke_role(user=obj.user, group=obj.group, namespace=obj.namespace, by=request.user, via=VIA)

    def delete_queryset(self, request, queryset):
        for obj in queryset:
            self.delete_model(request, obj)


VIA = AuditEvent.Via.CONSOLE
