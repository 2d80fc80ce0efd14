"""Authors get a slug, filled from their names, for the slug-routed authors API."""

from django.db import migrations, models
from django.utils.text import slugify


def fill_slugs(apps, schema_editor):  # type: ignore[no-untyped-def]
    Author = apps.get_model("library", "Author")
    taken: set[str] = set()
    for author in Author.objects.order_by("pk"):
        base = slugify(author.name)[:190] or "author"
        slug, number = base, 1
        while slug in taken:
            number += 1
            slug = f"{base}-{number}"
        taken.add(slug)
        author.slug = slug
        author.save(update_fields=["slug"])


class Migration(migrations.Migration):
    dependencies = [("library", "0001_initial")]

    operations = [
        # No index yet: the unique one comes with the AlterField below (PostgreSQL would make its "_like" twin twice).
        migrations.AddField("author", "slug", models.SlugField(max_length=200, null=True, db_index=False)),
        migrations.RunPython(fill_slugs, migrations.RunPython.noop),
        migrations.AlterField(
            "author",
            "slug",
            models.SlugField(
                max_length=200, unique=True, blank=True, help_text="The author in URLs: /api/authors/<slug>/."
            ),
        ),
    ]
