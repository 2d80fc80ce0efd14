"""The catalog's revision stamp, the row every process compares to know the catalog changed."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _


class RevisionStamp(models.Model):
    """The database's copy of a revision stamp (the catalog's, the credentials'): the cache holds the one every
    request compares, this one is read while the cache is unavailable, so that admin changes and revocations
    still reach every process (`revision`)."""

    key = models.CharField(_("key"), max_length=100, unique=True)
    value = models.CharField(_("stamp"), max_length=64)
    changed_at = models.DateTimeField(_("changed"), auto_now=True)

    class Meta:
        verbose_name = _("revision stamp")
        verbose_name_plural = _("revision stamps")

    def __str__(self) -> str:
        return f"{self.key}: {self.value}"
