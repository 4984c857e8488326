"""``StudioSession.ledger_pos`` is now the ``seq`` of the last store commit whose usage rows
Studio reconciled, on every backend (it was the ``usage`` table's row ``pos`` for SQLite
stores). A position of the old kind is not a seq, so every session starts again from 0: the
next opening reads its whole ledger once, which adds only what Studio lacks (rows are matched
by ``record_id``), and the position is a seq from then on."""

from django.db import migrations


def start_over(apps, schema_editor):  # type: ignore[no-untyped-def]
    apps.get_model("studio", "StudioSession").objects.update(ledger_pos=0)


class Migration(migrations.Migration):
    dependencies = [("studio", "0007_operator_list_and_usage_times")]

    operations = [migrations.RunPython(start_over, migrations.RunPython.noop)]
