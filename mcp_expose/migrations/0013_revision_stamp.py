from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("mcp_expose", "0012_toolcall_row_id"),
    ]

    operations = [
        migrations.CreateModel(
            name="RevisionStamp",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("key", models.CharField(max_length=100, unique=True, verbose_name="key")),
                ("value", models.CharField(max_length=64, verbose_name="stamp")),
                ("changed_at", models.DateTimeField(auto_now=True, verbose_name="changed")),
            ],
            options={
                "verbose_name": "revision stamp",
                "verbose_name_plural": "revision stamps",
            },
        ),
    ]
