"""Who holds which rights (the staff and superuser flags, groups, permissions), and what a
change of them says to the person it touches, in words they read on their memory page
("An administrator added you to the group Support on 3 May")."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.contrib.auth.models import Group, Permission

if TYPE_CHECKING:
    from accounts.models import User


@dataclass(frozen=True)
class Rights:
    staff: bool = False
    superuser: bool = False
    groups: frozenset[str] = frozenset()
    # Each permission as its words ("to change memory"), not its codename.
    permissions: frozenset[str] = frozenset()


def permission_words(permission: Permission) -> str:
    """A permission as the person reads it: "Can change memory" is "to change memory"."""
    name = permission.name.removeprefix("Can ")
    return f"to {name[:1].lower()}{name[1:]}"


def rights_of(person: User) -> Rights:
    """The person's rights as the database holds them now (their own permissions, apart
    from those their groups give them, which each group's record names)."""
    if person.pk is None:
        return Rights()
    return Rights(
        staff=person.is_staff,
        superuser=person.is_superuser,
        groups=frozenset(Group.objects.filter(user=person).values_list("name", flat=True)),
        permissions=frozenset(
            permission_words(p) for p in Permission.objects.filter(user=person).select_related("content_type")
        ),
    )


def group_permissions(group: Group) -> frozenset[str]:
    if group.pk is None:
        return frozenset()
    return frozenset(permission_words(p) for p in group.permissions.select_related("content_type"))


def rights_changes(before: Rights, after: Rights) -> list[str]:
    """What changed, one phrase each, as "An administrator ..." ends for the person."""
    said: list[str] = []
    for flag, made in (("staff", "staff"), ("superuser", "a superuser")):
        had, has = getattr(before, flag), getattr(after, flag)
        if has != had:
            said.append(f"made you {made}" if has else f"made you no longer {made}")
    said += [f"added you to the group {name}" for name in sorted(after.groups - before.groups)]
    said += [f"took you out of the group {name}" for name in sorted(before.groups - after.groups)]
    said += [f"gave you the permission {words}" for words in sorted(after.permissions - before.permissions)]
    said += [f"took away your permission {words}" for words in sorted(before.permissions - after.permissions)]
    return said


def group_changes(name: str, before: Iterable[str], after: Iterable[str], *, renamed_from: str = "") -> list[str]:
    """What a change to a group says to each of its members."""
    had, has = frozenset(before), frozenset(after)
    said = [f"renamed your group {renamed_from} to {name}"] if renamed_from and renamed_from != name else []
    said += [f"gave your group {name} the permission {words}" for words in sorted(has - had)]
    said += [f"took away from your group {name} the permission {words}" for words in sorted(had - has)]
    return said
