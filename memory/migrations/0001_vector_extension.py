from django.db import migrations
from pgvector.django import VectorExtension


class Migration(migrations.Migration):
    """pgvector first: memory embeddings are `vector` columns."""

    initial = True
    dependencies: list = []
    operations = [VectorExtension()]
