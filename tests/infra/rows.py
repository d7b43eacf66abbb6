"""A model instance's stored fields as values, for tests that compare a row read or written
by hand-made SQL with the ORM's."""

from __future__ import annotations

from django.db.models import Model


def field_values(instance: Model) -> dict:
    """Every stored field of the instance, as it holds it."""
    return {field.attname: getattr(instance, field.attname) for field in type(instance)._meta.concrete_fields}


def stored_values(instance: Model) -> dict:
    """Every stored field of the same row, as the ORM reads it back now."""
    return field_values(type(instance).objects.get(pk=instance.pk))
