from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0016_read_until"),
    ]

    operations = [
        migrations.AddField(
            model_name="memory",
            name="imported_from",
            field=models.CharField(
                blank=True,
                choices=[
                    ("chatgpt", "ChatGPT"),
                    ("claude", "Claude"),
                    ("gemini", "Gemini"),
                    ("copilot", "Microsoft Copilot"),
                    ("meta-ai", "Meta AI"),
                    ("perplexity", "Perplexity"),
                    ("another", "another assistant"),
                ],
                db_default="",
                default="",
                max_length=16,
            ),
        ),
    ]
