"""Issue #22: a workdir under the workspaces root is one of the person's own workspaces (W6, W15).

Two people, alice and mallory (neither staff), on one Studio with ``STUDIO_WORKDIR_ROOT`` set.
Mallory tries what an attacker would: the root itself, alice's workspace by its uuid, a path
into it through ``..``, through a symlink planted in her own workspace, a name that is not
UTF-8, Studio's data directory — through the real form, with every permission policy. Each is a
form error on the *Working directory* field and no session is made; her own workspaces and the
folders staff share still work.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from studio import services
from studio.models import StudioSession

pytestmark = pytest.mark.django_db

SECRET = "ALICE-PRIVATE-NOTES"


@pytest.fixture
def root(tmp_path: Path, settings: Any) -> Path:
    path = tmp_path / "workspaces-root"
    path.mkdir()
    settings.STUDIO_WORKDIR_ROOT = str(path)
    return path


@pytest.fixture
def alice_workspace(user: Any, demo_model: Any, root: Path) -> Path:
    session = services.session_create(
        owner=user, registered_model=demo_model, workdir="", permission_policy="workspace", effort="low", mode="build"
    )
    workspace = Path(session.workdir)
    assert workspace == root / str(session.pk)
    (workspace / "notes.txt").write_text(SECRET)
    (workspace / "sub").mkdir()
    return workspace


def _post(client: Client, workdir: str, policy: str = "workspace") -> Any:
    from studio.models import RegisteredModel

    model = RegisteredModel.objects.get(provider="demo")
    data = {"registered_model": model.pk, "workdir": workdir, "permission_policy": policy, "effort": "low"}
    return client.post(reverse("studio:session_create"), {**data, "mode": "build"})


def _refused(response: Any) -> str:
    assert response.status_code == 400, response.status_code
    errors = response.context["form"].errors
    assert list(errors) == ["workdir"], errors
    return " ".join(errors["workdir"])


@pytest.fixture
def mallory(client: Client, other_user: Any, demo_model: Any) -> Client:
    client.force_login(other_user)
    return client


@pytest.fixture
def mallory_workspace(mallory: Client, other_user: Any, root: Path) -> Path:
    response = _post(mallory, "")
    assert response.status_code == 302
    return Path(StudioSession.objects.filter(owner=other_user).get().workdir)


@pytest.mark.parametrize("policy", ["read-only", "workspace", "auto"])
def test_the_root_and_another_persons_workspace_are_refused(
    mallory: Client, other_user: Any, root: Path, alice_workspace: Path, mallory_workspace: Path, policy: str
) -> None:
    """W15: the root (every workspace in view), alice's uuid, a folder inside it, and ``..``."""
    before = StudioSession.objects.filter(owner=other_user).count()
    assert "holds every person's workspaces" in _refused(_post(mallory, str(root), policy))
    assert "holds every person's workspaces" in _refused(_post(mallory, str(root) + "/", policy))
    assert "not a workspace of one of your sessions" in _refused(_post(mallory, str(alice_workspace), policy))
    assert "not a workspace of one of your sessions" in _refused(_post(mallory, str(alice_workspace / "sub"), policy))
    sneaky = f"{mallory_workspace}/../{alice_workspace.name}/sub"
    assert "not a workspace of one of your sessions" in _refused(_post(mallory, sneaky, policy))
    assert "holds every person's workspaces" in _refused(_post(mallory, f"{mallory_workspace}/..", policy))
    assert StudioSession.objects.filter(owner=other_user).count() == before


def test_a_symlink_planted_in_ones_own_workspace_leads_nowhere_else(
    mallory: Client, other_user: Any, root: Path, alice_workspace: Path, mallory_workspace: Path
) -> None:
    """W15: the decision is made on the real path — a link to alice's workspace or to the root
    is alice's workspace or the root."""
    (mallory_workspace / "to-alice").symlink_to(alice_workspace)
    (mallory_workspace / "to-root").symlink_to(root)
    (root / "looks-like-mine").symlink_to(alice_workspace)
    assert "not a workspace of one of your sessions" in _refused(_post(mallory, str(mallory_workspace / "to-alice")))
    assert "holds every person's workspaces" in _refused(_post(mallory, str(mallory_workspace / "to-root")))
    assert "not a workspace of one of your sessions" in _refused(_post(mallory, str(root / "looks-like-mine")))
    assert StudioSession.objects.filter(owner=other_user).count() == 1


def test_names_that_are_not_utf8_are_refused_clearly(
    mallory: Client, other_user: Any, root: Path, mallory_workspace: Path
) -> None:
    """W15: a folder whose name is not UTF-8 (in her own workspace, or directly under the root)
    is refused with a clear message — through the form as through the service — never stored."""
    for parent in (mallory_workspace, root):
        raw = os.fsencode(parent) + b"/bad\xff"
        os.mkdir(raw)
        escaped = os.fsdecode(raw)  # the name as Python sees it: a lone surrogate
        with pytest.raises(services.WorkdirError, match="not valid text"):
            services.session_create(
                owner=other_user,
                registered_model=StudioSession.objects.get(owner=other_user).registered_model,
                workdir=escaped,
                permission_policy="workspace",
                effort="low",
                mode="build",
            )
        refused = _refused(_post(mallory, f"{parent}/bad\ufffd"))  # what a browser can send for it
        assert "No such directory" in refused or "not a workspace" in refused
    assert StudioSession.objects.filter(owner=other_user).count() == 1


@pytest.mark.usefixtures("root")
def test_studio_data_is_never_a_workdir(mallory: Client, settings: Any, studio_data_dir: Path) -> None:
    """W15: the data dir (database, stores, keys), what holds it and anything in it, with or
    without a root."""
    (studio_data_dir / "sessions").mkdir(exist_ok=True)
    for root in (settings.STUDIO_WORKDIR_ROOT, ""):
        settings.STUDIO_WORKDIR_ROOT = root
        for path in (studio_data_dir, studio_data_dir.parent):
            assert "Studio's own data" in _refused(_post(mallory, str(path)))
        assert "inside Studio's data directory" in _refused(_post(mallory, str(studio_data_dir / "sessions")))


def test_without_a_root_the_data_dirs_workspaces_belong_to_their_people_too(
    mallory: Client, user: Any, demo_model: Any, settings: Any, studio_data_dir: Path
) -> None:
    """W15: with no root, fresh workspaces live in ``<data dir>/workspaces``: same rules."""
    settings.STUDIO_WORKDIR_ROOT = ""
    theirs = services.session_create(
        owner=user, registered_model=demo_model, workdir="", permission_policy="workspace", effort="low", mode="build"
    )
    assert Path(theirs.workdir).parent == studio_data_dir.resolve() / "workspaces"
    assert "not a workspace of one of your sessions" in _refused(_post(mallory, theirs.workdir))
    assert "holds every person's workspaces" in _refused(_post(mallory, str(Path(theirs.workdir).parent)))


def test_ones_own_workspaces_and_shared_folders_are_accepted(
    mallory: Client, other_user: Any, root: Path, tmp_path: Path, settings: Any, mallory_workspace: Path
) -> None:
    """W15: a workspace of her own (and a folder in it) again; a folder staff shared; nothing
    outside the root otherwise."""
    (mallory_workspace / "project").mkdir()
    assert _post(mallory, str(mallory_workspace)).status_code == 302
    assert _post(mallory, str(mallory_workspace / "project")).status_code == 302
    shared = tmp_path / "shared-data"
    shared.mkdir()
    assert "must be inside" in _refused(_post(mallory, str(shared)))
    settings.STUDIO_SHARED_WORKDIRS = [str(shared)]
    assert _post(mallory, str(shared)).status_code == 302
    workdirs = set(StudioSession.objects.filter(owner=other_user).values_list("workdir", flat=True))
    assert workdirs == {str(mallory_workspace), str(mallory_workspace / "project"), str(shared)}


def test_a_session_made_before_the_rules_on_the_root_is_not_opened(
    other_user: Any, demo_model: Any, root: Path, alice_workspace: Path
) -> None:
    """W15: a confined session whose workdir is the root (made before this check) is refused
    when the host opens it, with the reason — its agent never lists everyone's folders."""
    from studio.host.contract import HostError
    from studio.selectors import session_config

    legacy = StudioSession.objects.create(
        owner=other_user, registered_model=demo_model, workdir=str(root), store_path="/nonexistent.sqlite"
    )
    with pytest.raises(HostError) as info:
        session_config(str(legacy.pk))
    assert info.value.code == "workdir_refused" and "holds every person's workspaces" in info.value.message


def test_a_staff_session_on_the_server_keeps_to_its_own_workspaces_too(
    client: Client, admin_user: Any, demo_model: Any, root: Path, alice_workspace: Path, tmp_path: Path
) -> None:
    """W15: staff (their tools run as the Studio process) may not take the root or alice's
    workspace either; a folder that holds Studio's data — a checkout with ``.studio-data`` in
    it — is theirs to use."""
    client.force_login(admin_user)
    assert "holds every person's workspaces" in _refused(_post(client, str(root)))
    assert "not a workspace of one of your sessions" in _refused(_post(client, str(alice_workspace)))
    assert "must be inside" in _refused(_post(client, str(tmp_path)))
    from django.conf import settings

    settings.STUDIO_WORKDIR_ROOT = ""
    assert _post(client, str(tmp_path)).status_code == 302
    assert StudioSession.objects.get(owner=admin_user).workdir == str(tmp_path.resolve())


def test_shared_folders_are_checked_at_start_up(settings: Any, studio_data_dir: Path, tmp_path: Path) -> None:
    """W15: a shared folder must exist and may not hold, or lie in, Studio's data."""
    from django.core.exceptions import ImproperlyConfigured

    from studio.workspaces import check_shared_workdirs

    for bad, reason in [
        (tmp_path / "missing", "is not a directory"),
        (tmp_path, "holds or lies in Studio's own data"),
        (studio_data_dir, "holds or lies in Studio's own data"),
    ]:
        (studio_data_dir / "sub").mkdir(exist_ok=True)
        settings.STUDIO_SHARED_WORKDIRS = [str(bad)]
        with pytest.raises(ImproperlyConfigured, match=reason):
            check_shared_workdirs()
    settings.STUDIO_SHARED_WORKDIRS = [str(studio_data_dir / "sub")]
    with pytest.raises(ImproperlyConfigured, match="lies in Studio's own data"):
        check_shared_workdirs()
    (tmp_path / "fine").mkdir()
    settings.STUDIO_SHARED_WORKDIRS = f"{tmp_path / 'fine'}, "
    check_shared_workdirs()


def test_a_hosts_protected_paths_are_resolved_once_and_again_when_the_settings_move(
    tmp_path: Path, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ProtectedPaths`` (issue 25: an opening's eight ``realpath`` calls): the same paths as
    ``protected_paths()``, read from the file system once; a moved data directory is a new key."""
    from studio import workspaces

    calls: list[str] = []
    real = os.path.realpath

    def counting(path: Any, *args: Any, **kwargs: Any) -> str:
        calls.append(str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(workspaces.os.path, "realpath", counting)
    kept = workspaces.ProtectedPaths()
    first = kept.get()
    assert first == workspaces.protected_paths()
    assert calls, "protected_paths() resolves every path"
    calls.clear()
    assert kept.get() is first and kept.get() == first
    assert calls == [], "read again without settings changing"

    moved = tmp_path / "moved-data"
    moved.mkdir()
    settings.STUDIO_DATA_DIR = str(moved)
    again = kept.get()
    assert again == workspaces.protected_paths() != first
    assert Path(real(moved)) in again
