import django.contrib.postgres.indexes
from django.conf import settings
from django.db import migrations

import infra.hashed_words
from infra.hashed_words import hashed_words


def hash_indexed_words(apps, schema_editor):
    """Exchanges and summaries indexed before words were hashed: found by their words too."""
    ConversationEmbedding = apps.get_model("coach", "ConversationEmbedding")
    Message = apps.get_model("coach", "Message")
    ChatSession = apps.get_model("coach", "ChatSession")
    rows = ConversationEmbedding.objects.filter(embedding__isnull=False).only(
        "pk", "user_id", "kind", "session_id", "message_id", "reply_id"
    )
    for row in rows.iterator(chunk_size=500):
        if row.kind == "summary":
            text = ChatSession.objects.get(pk=row.session_id).summary
        else:
            said = Message.objects.filter(pk=row.message_id).values_list("content", flat=True).first() or ""
            answered = Message.objects.filter(pk=row.reply_id).values_list("content", flat=True).first() or ""
            text = f"{said}\n{answered}"
        ConversationEmbedding.objects.filter(pk=row.pk).update(words=hashed_words(row.user_id, text))


class Migration(migrations.Migration):
    dependencies = [
        ("coach", "0011_forgetting_reaches_everywhere"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="conversationembedding",
            name="words",
            field=infra.hashed_words.HashedWordsField(),
        ),
        migrations.AddIndex(
            model_name="conversationembedding",
            index=django.contrib.postgres.indexes.GinIndex(fields=["words"], name="conversation_embedding_words"),
        ),
        migrations.RunPython(hash_indexed_words, migrations.RunPython.noop, elidable=True),
    ]
