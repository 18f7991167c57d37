"""A write that needs a role re-checks it in its own transaction: an owner or editor whose
role is taken away after the service read it, but before the write lands, is refused with
403 and changes nothing. The race is made exact at the boto3 edge: the other owner's change
is applied right before the caller's transaction is sent (moto's server would not order
them for us)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
import threading
from typing import Any

import pytest

from recall.domain.access import Role
from recall.errors import Conflict, Forbidden
from recall.store.dynamodb import dynamodb_client
from recall.wiring import project_service, project_store
from tests.integration.conftest import Api, Reply, transactions_after_every_racer_read


@dataclass
class Lapse:
    """Applies ``change`` once, right before the next transaction the store sends."""

    change: Callable[[], None] | None = None
    applied: bool = False


@pytest.fixture
def lapse(monkeypatch: pytest.MonkeyPatch) -> Iterator[Lapse]:
    client = dynamodb_client()
    transact = client.transact_write_items
    pending = Lapse()

    def after_the_change(**kwargs: Any) -> Any:
        change, pending.change = pending.change, None
        if change is not None:  # the other owner's own writes pass straight through
            change()
            pending.applied = True
        return transact(**kwargs)

    monkeypatch.setattr(client, "transact_write_items", after_the_change)
    yield pending
    monkeypatch.undo()


def roles_of(project: str) -> dict[str, str]:
    return {member.user_id: member.role.value for member in project_store().members(project)}


def lose_role(how: str, owner: Api, loser: Api, project: str) -> Callable[[], None]:
    """``owner`` demotes ``loser`` to viewer or removes them."""

    def change() -> None:
        if how == "demoted":
            project_service().set_member(owner.sub or "", project, loser.sub or "", Role.VIEWER)
        else:
            project_service().remove_member(owner.sub or "", project, loser.sub or "")

    return change


WRITES: dict[str, Callable[[Api, str, Api], Reply]] = {
    "add a member": lambda actor, project, other: actor.put(
        f"/projects/{project}/members/{other.sub}", {"role": "owner"}
    ),
    "change a member's role": lambda actor, project, other: actor.put(
        f"/projects/{project}/members/{other.sub}", {"role": "owner"}
    ),
    "remove a member": lambda actor, project, other: actor.delete(
        f"/projects/{project}/members/{other.sub}"
    ),
    "set a member's budget": lambda actor, project, other: actor.put(
        f"/projects/{project}/members/{other.sub}/budget", {"turnsPerDay": 1}
    ),
    "rename the project": lambda actor, project, other: actor.patch(
        f"/projects/{project}", {"name": "Taken over"}
    ),
    "change the project's context": lambda actor, project, other: actor.patch(
        f"/projects/{project}", {"context": {"currency": "USD"}}
    ),
}


@pytest.mark.parametrize("how", ["demoted", "removed"])
@pytest.mark.parametrize("write", sorted(WRITES))
def test_an_owner_who_loses_their_role_before_their_write_lands_is_refused_and_changes_nothing(
    alice: Api,
    bob: Api,
    carol: Api,
    make_project: Callable[..., str],
    lapse: Lapse,
    write: str,
    how: str,
) -> None:
    # Given alice and bob own the project; carol is a viewer unless alice is adding her
    members = {bob: "owner"} if write == "add a member" else {bob: "owner", carol: "viewer"}
    project = make_project(alice, members, currency="EUR")
    before = project_store().get(project)
    # When bob takes alice's role away after her role was read, right before her write
    lapse.change = lose_role(how, bob, alice, project)
    reply = WRITES[write](alice, project, carol)
    # Then her write is refused as hers no longer to make, and only bob's change happened
    assert lapse.applied
    assert reply.status == 403, reply
    assert reply.body["error"]["code"] == "forbidden"
    expected = {bob.sub: "owner"}
    if write != "add a member":
        expected[carol.sub] = "viewer"
    if how == "demoted":
        expected[alice.sub] = "viewer"
    assert roles_of(project) == expected
    after = project_store().get(project)
    assert after is not None and before is not None
    assert (after.name, after.context, after.owner_count) == (before.name, before.context, 1)


def test_an_owner_whose_change_finds_the_member_changed_meanwhile_reads_them_again(
    alice: Api, bob: Api, carol: Api, make_project: Callable[..., str], lapse: Lapse
) -> None:
    # Given alice and bob own the project, and carol is a viewer
    project = make_project(alice, {bob: "owner", carol: "viewer"})

    def bob_promotes_carol() -> None:
        project_service().set_member(bob.sub or "", project, carol.sub or "", Role.OWNER)

    # When bob makes carol an owner right before alice's change of her to editor lands
    lapse.change = bob_promotes_carol
    reply = alice.put(f"/projects/{project}/members/{carol.sub}", {"role": "editor"})
    # Then only carol's item failed its condition: alice, still an owner, is not refused
    # but reads carol again and changes her from owner
    assert lapse.applied
    assert reply.status == 200, reply
    assert roles_of(project) == {alice.sub: "owner", bob.sub: "owner", carol.sub: "editor"}
    assert project_store().get(project).owner_count == 2  # type: ignore[union-attr]


def test_an_owner_removed_while_stepping_down_is_not_put_back(
    alice: Api, bob: Api, make_project: Callable[..., str], lapse: Lapse
) -> None:
    # Given alice and bob own the project
    project = make_project(alice, {bob: "owner"})
    # When bob removes alice right before her step down to editor lands
    lapse.change = lose_role("removed", bob, alice, project)
    reply = alice.put(f"/projects/{project}/members/{alice.sub}", {"role": "editor"})
    # Then she is refused and stays removed
    assert lapse.applied
    assert reply.status == 403, reply
    assert roles_of(project) == {bob.sub: "owner"}


def test_an_editor_who_loses_their_role_before_renaming_is_refused(
    alice: Api, bob: Api, make_project: Callable[..., str], lapse: Lapse
) -> None:
    # Given bob edits alice's project
    project = make_project(alice, {bob: "editor"})
    # When alice makes him a viewer right before his rename lands
    lapse.change = lose_role("demoted", alice, bob, project)
    reply = bob.patch(f"/projects/{project}", {"name": "Bob's now"})
    # Then the rename is refused
    assert lapse.applied
    assert reply.status == 403, reply
    assert alice.get(f"/projects/{project}").body["name"] != "Bob's now"


def test_two_owners_stepping_down_at_once_leave_an_owner(
    alice: Api, bob: Api, make_project: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given two owners, each about to make themselves an editor, both having read the owner
    # count before either writes (as two Lambda instances would): each still holds their own
    # role when they write, so only the owner count can stop the second
    project = make_project(alice, {bob: "owner"})
    transactions_after_every_racer_read(monkeypatch, 2)
    outcomes: dict[str, str] = {}

    def step_down(actor: Api) -> None:
        try:
            project_service().set_member(actor.sub or "", project, actor.sub or "", Role.EDITOR)
            outcomes[actor.sub or ""] = "stepped down"
        except Conflict:
            outcomes[actor.sub or ""] = "conflict"
        except Forbidden:
            outcomes[actor.sub or ""] = "forbidden"

    racers = [threading.Thread(target=step_down, args=(actor,)) for actor in (alice, bob)]
    # When
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(30)
    # Then one stepped down, the other was refused for the last owner's sake
    assert sorted(outcomes.values()) == ["conflict", "stepped down"]
    monkeypatch.undo()
    assert sorted(roles_of(project).values()) == ["editor", "owner"]
    assert project_store().get(project).owner_count == 1  # type: ignore[union-attr]
