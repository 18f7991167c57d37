"""ProjectService: creating projects and managing who is on them."""

from __future__ import annotations

import pytest

from recall.domain.access import Role
from recall.errors import Conflict, Forbidden, Invalid, NotFound
from recall.settings import Settings
from tests.unit.services.in_memory import InMemoryRecall

ALICE, BOB, VIEWER, STRANGER, NEWCOMER = "alice", "bob", "vera", "stranger", "nina"


def shop(recall: InMemoryRecall) -> str:
    return recall.projects.add(ALICE, {BOB: Role.EDITOR, VIEWER: Role.VIEWER})


def test_creating_a_project_makes_the_caller_its_only_owner() -> None:
    # Given
    recall = InMemoryRecall()
    # When
    project = recall.project_service.create(BOB, "  Corner \n Shop ", {"currency": "EUR"})
    # Then
    assert (project.name, project.context, project.created_by) == (
        "Corner Shop",
        {"currency": "EUR"},
        BOB,
    )
    got, role = recall.project_service.get(BOB, project.project_id)
    assert (got.owner_count, role) == (1, Role.OWNER)


def test_a_project_with_a_blank_name_or_a_bad_context_is_invalid() -> None:
    # Given
    recall = InMemoryRecall(Settings(project_context_max_attributes=1))
    # When / Then
    with pytest.raises(Invalid):
        recall.project_service.create(BOB, "   ", {})
    with pytest.raises(Invalid):
        recall.project_service.create(BOB, "Shop", {"a": 1, "b": 2})
    assert recall.projects.projects == {}


def test_an_editor_changes_the_project_a_viewer_only_reads_it_and_a_stranger_neither() -> None:
    # Given
    recall = InMemoryRecall()
    project = shop(recall)
    service = recall.project_service
    # When
    changed, role = service.update(BOB, project, "Renamed", None)
    # Then
    assert (changed.name, role) == ("Renamed", Role.EDITOR)
    assert service.get(VIEWER, project)[1] == Role.VIEWER
    with pytest.raises(Forbidden):
        service.update(VIEWER, project, "Mine now", None)
    with pytest.raises(Forbidden):
        service.get(STRANGER, project)
    with pytest.raises(Forbidden):
        service.members(STRANGER, project)


def test_only_an_owner_manages_members() -> None:
    # Given
    recall = InMemoryRecall()
    project = shop(recall)
    service = recall.project_service
    # When / Then
    with pytest.raises(Forbidden):
        service.set_member(BOB, project, NEWCOMER, Role.VIEWER)
    with pytest.raises(Forbidden):
        service.remove_member(BOB, project, VIEWER)
    member, added = service.set_member(ALICE, project, NEWCOMER, Role.VIEWER)
    assert (member.user_id, member.role, added) == (NEWCOMER, Role.VIEWER, True)
    _, added_again = service.set_member(ALICE, project, NEWCOMER, Role.EDITOR)
    assert added_again is False
    assert recall.projects.role_of(project, NEWCOMER) is Role.EDITOR


def test_setting_the_role_a_member_already_has_changes_nothing() -> None:
    # Given
    recall = InMemoryRecall()
    project = shop(recall)
    # When
    member, added = recall.project_service.set_member(ALICE, project, BOB, Role.EDITOR)
    # Then
    assert (member.role, added) == (Role.EDITOR, False)
    assert recall.projects.members_changed == 0


def test_the_last_owner_can_neither_step_down_nor_leave() -> None:
    # Given
    recall = InMemoryRecall()
    project = shop(recall)
    service = recall.project_service
    # When / Then
    with pytest.raises(Conflict, match="at least one owner"):
        service.set_member(ALICE, project, ALICE, Role.EDITOR)
    with pytest.raises(Conflict, match="at least one owner"):
        service.remove_member(ALICE, project, ALICE)
    assert recall.projects.role_of(project, ALICE) is Role.OWNER


def test_with_a_second_owner_the_first_may_leave() -> None:
    # Given
    recall = InMemoryRecall()
    project = shop(recall)
    service = recall.project_service
    service.set_member(ALICE, project, BOB, Role.OWNER)
    # When
    service.remove_member(ALICE, project, ALICE)
    # Then
    assert recall.projects.role_of(project, ALICE) is None
    assert recall.projects.projects[project].owner_count == 1
    assert [(m.user_id, m.role) for m in service.members(BOB, project)] == [
        (BOB, Role.OWNER),
        (VIEWER, Role.VIEWER),
    ]


def test_removing_someone_who_is_not_a_member_is_not_found() -> None:
    # Given
    recall = InMemoryRecall()
    project = shop(recall)
    # When / Then
    with pytest.raises(NotFound):
        recall.project_service.remove_member(ALICE, project, STRANGER)


def test_a_member_change_that_loses_a_race_is_retried_then_a_conflict() -> None:
    # Given three attempts at most
    recall = InMemoryRecall(Settings(member_change_attempts=3))
    project = shop(recall)
    service = recall.project_service
    # When two races are lost, the third attempt lands
    recall.projects.lost_races = 2
    _, added = service.set_member(ALICE, project, NEWCOMER, Role.VIEWER)
    # Then
    assert added is True
    # and when three are lost, it is a conflict
    recall.projects.lost_races = 3
    with pytest.raises(Conflict):
        service.set_member(ALICE, project, NEWCOMER, Role.EDITOR)
    recall.projects.lost_races = 3
    with pytest.raises(Conflict):
        service.remove_member(ALICE, project, NEWCOMER)
    assert recall.projects.role_of(project, NEWCOMER) is Role.VIEWER
