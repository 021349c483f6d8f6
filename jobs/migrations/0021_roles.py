"""Roles granted everywhere or per namespace (RoleGrant); existing users
keep their access. API tokens may be narrowed to one namespace or to reading."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def grant_existing_users(apps, schema_editor):
    """No one loses access: staff changed settings and channels, which only
    an admin may, so staff become global admins; other active users viewed,
    so they become global viewers. Superusers keep every right by the flag."""
    User = apps.get_model(*settings.AUTH_USER_MODEL.split("."))
    RoleGrant = apps.get_model("jobs", "RoleGrant")
    grants = [
        RoleGrant(user_id=user.pk, role="admin" if user.is_staff else "viewer", namespace=None)
        for user in User.objects.filter(is_active=True, is_superuser=False).only("pk", "is_staff")
    ]
    RoleGrant.objects.bulk_create(grants, batch_size=500)


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("jobs", "0020_audit_subjects"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="apitoken",
            name="namespace",
            field=models.CharField(blank=True, max_length=100, null=True),
        ),
        migrations.AddField(
            model_name="apitoken",
            name="read_only",
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.AlterField(
            model_name="auditevent",
            name="subject",
            field=models.CharField(
                choices=[
                    ("job", "Job"),
                    ("settings", "Settings"),
                    ("channels", "Alert channels"),
                    ("sign-in", "Sign-in"),
                    ("roles", "Roles"),
                ],
                default="job",
                max_length=10,
            ),
        ),
        migrations.CreateModel(
            name="RoleGrant",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "role",
                    models.CharField(
                        choices=[
                            ("viewer", "viewer"),
                            ("operator", "operator"),
                            ("editor", "editor"),
                            ("admin", "admin"),
                        ],
                        max_length=10,
                    ),
                ),
                ("namespace", models.CharField(blank=True, max_length=100, null=True)),
                (
                    "group",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="role_grants",
                        to="auth.group",
                    ),
                ),
                (
                    "user",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="role_grants",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.CheckConstraint(
                        condition=models.Q(
                            models.Q(("user__isnull", False), ("group__isnull", True)),
                            models.Q(("user__isnull", True), ("group__isnull", False)),
                            _connector="OR",
                        ),
                        name="rolegrant_user_or_group",
                    ),
                    models.CheckConstraint(
                        condition=models.Q(("role__in", ["viewer", "operator", "editor", "admin"])),
                        name="rolegrant_role_valid",
                    ),
                    models.UniqueConstraint(
                        condition=models.Q(("user__isnull", False)),
                        fields=("user", "namespace"),
                        name="rolegrant_user_scope",
                    ),
                    models.UniqueConstraint(
                        condition=models.Q(("namespace__isnull", True), ("user__isnull", False)),
                        fields=("user",),
                        name="rolegrant_user_global",
                    ),
                    models.UniqueConstraint(
                        condition=models.Q(("group__isnull", False)),
                        fields=("group", "namespace"),
                        name="rolegrant_group_scope",
                    ),
                    models.UniqueConstraint(
                        condition=models.Q(("group__isnull", False), ("namespace__isnull", True)),
                        fields=("group",),
                        name="rolegrant_group_global",
                    ),
                ],
            },
        ),
        migrations.RunPython(grant_existing_users, migrations.RunPython.noop),
    ]
