"""The Django admin's page for role grants (beside its users and groups)."""

from django.contrib import admin

from jobs.models import RoleGrant


@admin.register(RoleGrant)
class RoleGrantAdmin(admin.ModelAdmin):
    list_display = ["user", "group", "role", "namespace"]
    list_filter = ["role", "namespace"]
    search_fields = ["user__username", "group__name", "namespace"]
