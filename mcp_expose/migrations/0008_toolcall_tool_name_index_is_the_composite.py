"""Drop Django's single-column index on `ToolCall.tool_name`: the (tool_name, created_at) index leads with it and
answers the same lookups, and every usage row paid for both.

Only those indexes go, by the names Django gave them (on PostgreSQL also the `_like` twin), and only if they
exist: an index a project added on the column itself stays. On SQLite an `AlterField` would copy the whole
usage table to drop an index, so the database side is done here by name.
"""

from django.db import migrations, models


def _django_index_names(schema_editor, model) -> list[str]:
    """The names Django creates for `tool_name`'s index, in the order `_field_indexes_sql` creates them."""
    table = model._meta.db_table
    return [
        schema_editor._create_index_name(table, ["tool_name"]),
        schema_editor._create_index_name(table, ["tool_name"], suffix="_like"),
    ]


def _existing_indexes(schema_editor, model) -> dict[str, str]:
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, model._meta.db_table)
    return {name.lower(): name for name, details in constraints.items() if details["index"]}


def drop_tool_name_indexes(apps, schema_editor) -> None:
    model = apps.get_model("mcp_expose", "ToolCall")
    existing = _existing_indexes(schema_editor, model)
    for name in _django_index_names(schema_editor, model):
        if name.lower() in existing:
            schema_editor.execute(schema_editor._delete_index_sql(model, existing[name.lower()]))


def restore_tool_name_indexes(apps, schema_editor) -> None:
    model = apps.get_model("mcp_expose", "ToolCall")
    indexed = model._meta.get_field("tool_name").clone()  # as 0007 declared it, whichever state we are handed
    indexed.db_index = True
    indexed.set_attributes_from_name("tool_name")
    indexed.model = model
    existing = _existing_indexes(schema_editor, model)
    statements = schema_editor._field_indexes_sql(model, indexed)
    for name, statement in zip(_django_index_names(schema_editor, model), statements, strict=False):
        if name.lower() not in existing:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [
        ("mcp_expose", "0007_toolcall_input_required"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="toolcall",
                    name="tool_name",
                    field=models.CharField(max_length=64, verbose_name="tool"),
                ),
            ],
            database_operations=[migrations.RunPython(drop_tool_name_indexes, restore_tool_name_indexes)],
        ),
    ]
