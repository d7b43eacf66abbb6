import django.contrib.postgres.indexes
from django.conf import settings
from django.db import migrations

import infra.hashed_words
from infra.hashed_words import hashed_words


def hash_stored_words(apps, schema_editor):
    """Memories kept before words were hashed: found by their words from now on too."""
    Memory = apps.get_model("memory", "Memory")
    for memory in Memory.objects.only("pk", "user_id", "summary", "content").iterator(chunk_size=500):
        text = (
            memory.summary
            if memory.content.strip() == memory.summary.strip()
            else f"{memory.summary}\n{memory.content}"
        )
        Memory.objects.filter(pk=memory.pk).update(words=hashed_words(memory.user_id, text))


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0009_staff_suggest_changes_to_protected_memories"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="memory",
            name="words",
            field=infra.hashed_words.HashedWordsField(),
        ),
        migrations.AddIndex(
            model_name="memory",
            index=django.contrib.postgres.indexes.GinIndex(fields=["words"], name="memory_words"),
        ),
        migrations.RunPython(hash_stored_words, migrations.RunPython.noop, elidable=True),
    ]
