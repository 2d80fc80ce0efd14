"""Seal the upstream servers' stored secrets again under the current SECRET_KEY, after a rotation.

A secret sealed under a key in SECRET_KEY_FALLBACKS still opens, but only while that key stays there: this command
is what lets the old key go. A reseal changes the ciphertext, never the secret, so it writes the sealed columns
alone (`update()`: no `post_save`, no `updated_at`): the catalog does not move, no approval is withdrawn and
nothing has to be entered again. A secret that opens under no key is named (server and field, never a value);
every other one is still resealed, and the command then fails.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from mcp_expose.models import UpstreamServer
from mcp_expose.upstream.sealing import SecretUnavailable, reseal


def sealed_fields() -> list[str]:
    """Every sealed column of a server: by name, so a sealed column added later is resealed too."""
    return [field.name for field in UpstreamServer._meta.concrete_fields if field.name.startswith("sealed_")]


class Command(BaseCommand):
    help = (
        "Seal every upstream server's stored secrets (headers, client secret) again under the current SECRET_KEY. "
        "Run it after rotating SECRET_KEY, while the old key is still in SECRET_KEY_FALLBACKS. Fails when a secret "
        "opens under neither; the others are resealed all the same."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--dry-run", action="store_true", help="Open every secret and say what would be resealed; write nothing."
        )

    def handle(self, *args: Any, dry_run: bool, **options: Any) -> None:
        fields = sealed_fields()
        resealed = unopened = 0
        # One transaction, the rows locked: a secret entered in the admin meanwhile waits, and is not overwritten.
        with transaction.atomic():
            for row in UpstreamServer.objects.select_for_update().order_by("name"):
                changes, problems = self._reseal(row, fields)
                unopened += len(problems)
                for problem in problems:
                    self.stdout.write(self.style.ERROR(f"{row.name}: {problem}"))
                if changes and not dry_run:
                    UpstreamServer.objects.filter(pk=row.pk).update(**changes)
                resealed += len(changes)
                if changes:
                    verb = "would reseal" if dry_run else "resealed"
                    self.stdout.write(f"{row.name}: {verb} {', '.join(changes)}")
                elif not problems:
                    self.stdout.write(f"{row.name}: nothing to reseal")
        if dry_run:
            self.stdout.write(f"Secrets to reseal: {resealed}. Nothing was written (--dry-run).")
        else:
            self.stdout.write(f"Secrets resealed: {resealed}.")
        if unopened:
            raise CommandError(
                f"Secrets that open under neither SECRET_KEY nor SECRET_KEY_FALLBACKS: {unopened}. Enter them again "
                "in the admin, or put the key they were sealed under back in SECRET_KEY_FALLBACKS and run this "
                "again. " + ("Nothing was written." if dry_run else "The others were resealed.")
            )

    @staticmethod
    def _reseal(row: UpstreamServer, fields: list[str]) -> tuple[dict[str, str], list[str]]:
        """The row's sealed columns that change, with their new values; and why each that cannot be opened."""
        changes: dict[str, str] = {}
        problems: list[str] = []
        for name in fields:
            stored = getattr(row, name)
            if not stored:
                continue
            try:
                sealed = reseal(stored, name)  # its message is read after the server's name
            except SecretUnavailable as exc:
                problems.append(str(exc))
                continue
            if sealed != stored:
                changes[name] = sealed
        return changes, problems
