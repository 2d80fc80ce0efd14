"""Drop the single-column index on `ToolCall.tool_name`: the (tool_name, created_at) index leads with it and
answers the same lookups, and every usage row paid for both.

Only the index goes. On SQLite an `AlterField` would copy the whole usage table to drop it, so the
database side drops exactly the indexes on `tool_name` alone (on PostgreSQL also its `_like` index).
"""

from django.db import migrations, models


def _tool_name_only_indexes(schema_editor, model) -> list[str]:
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, model._meta.db_table)
    return sorted(
        name for name, details in constraints.items()
        if details["index"] and not details["unique"] and not details["primary_key"] and details["columns"] == ["tool_name"]
    )


def drop_tool_name_indexes(apps, schema_editor) -> None:
    model = apps.get_model("mcp_expose", "ToolCall")
    for name in _tool_name_only_indexes(schema_editor, model):
        schema_editor.execute(schema_editor._delete_index_sql(model, name))


def restore_tool_name_index(apps, schema_editor) -> None:
    model = apps.get_model("mcp_expose", "ToolCall")
    indexed = model._meta.get_field("tool_name").clone()
    indexed.db_index = True
    indexed.set_attributes_from_name("tool_name")
    indexed.model = model
    for statement in schema_editor._field_indexes_sql(model, indexed):
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
            database_operations=[migrations.RunPython(drop_tool_name_indexes, restore_tool_name_index)],
        ),
    ]
