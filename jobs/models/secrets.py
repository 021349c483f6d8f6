"""Secrets: named values that jobs use by reference ({{ secret.NAME }}),
stored encrypted (jobs.secrets) and never shown back."""

from django.db import models
from django.utils.timezone import now as _now

# What a secret's name may be; a reference names it the same way
# (jobs.secrets.REFERENCE_RE), so both read it from here.
NAME_PATTERN = r"[A-Za-z0-9_.-]{1,100}"
MAX_VALUE_BYTES = 65_536


class Secret(models.Model):
    name = models.CharField(max_length=100, unique=True)
    # The value as a Fernet token (jobs.core.crypto, purpose SECRETS): only a
    # run reads it back, to substitute it (jobs.secrets.resolve).
    token = models.TextField()
    description = models.CharField(max_length=500, blank=True)
    set_at = models.DateTimeField(default=_now)
    set_by = models.CharField(max_length=150, blank=True)
    # Who may use it: the namespaces whose jobs may reference it ("" is the
    # jobs outside any namespace); empty, every namespace's.
    namespaces = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            # The name is what a reference matches: one that no reference
            # could name must never be stored, whoever writes the row.
            models.CheckConstraint(
                condition=models.Q(name__regex=rf"^{NAME_PATTERN}\Z"), name="secret_name_valid"
            ),
        ]

    def __str__(self):
        return self.name
