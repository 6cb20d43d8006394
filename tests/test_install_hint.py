"""Install hints name the extra the way this copy of awb was installed: from a clone, the clone."""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from awb import install_hint as hints
from awb.install_hint import install_hint

ROOT = Path(__file__).resolve().parents[1]


class Recorded:
    """A distribution whose `direct_url.json` holds `text` (None: pip recorded none, an index install)."""

    def __init__(self, text: str | None) -> None:
        self.text = text

    def read_text(self, name: str) -> str | None:
        assert name == "direct_url.json"
        return self.text


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> Any:
    def record(text: str | None, *, missing: bool = False) -> None:
        def distribution(name: str) -> Recorded:
            assert name == "agent-workbench"
            if missing:
                raise metadata.PackageNotFoundError(name)
            return Recorded(text)

        monkeypatch.setattr(hints.metadata, "distribution", distribution)
        hints._installed_from_folder.cache_clear()

    yield record
    hints._installed_from_folder.cache_clear()


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (None, "pip install 'agent-workbench[embed]'"),
        (
            json.dumps({"url": "file:///home/me/awb", "dir_info": {"editable": True}}),
            "pip install -e '/home/me/awb[embed]'",
        ),
        (json.dumps({"url": "file:///home/me/my%20awb", "dir_info": {}}), "pip install '/home/me/my awb[embed]'"),
        (
            json.dumps({"url": "https://example.invalid/awb.tar.gz", "archive_info": {}}),
            "pip install 'agent-workbench[embed]'",
        ),
        (
            json.dumps({"url": "git+https://example.invalid/awb", "vcs_info": {"vcs": "git"}}),
            "pip install 'agent-workbench[embed]'",
        ),
        ("{not json", "pip install 'agent-workbench[embed]'"),
        ("[]", "pip install 'agent-workbench[embed]'"),
    ],
)
def test_the_hint_follows_what_pip_recorded(recorded: Any, text: str | None, said: str) -> None:
    recorded(text)
    assert install_hint("embed") == said


def test_an_awb_pip_does_not_know_gets_the_index_name(recorded: Any) -> None:
    recorded(None, missing=True)
    assert install_hint("wasm") == "pip install 'agent-workbench[wasm]'"


def test_this_clone_installed_for_its_tests_is_named_as_the_folder_to_install_from() -> None:
    # `make install-dev` installs this clone editable: a hint for the index would swap it for a release.
    hints._installed_from_folder.cache_clear()
    direct = json.loads(metadata.distribution("agent-workbench").read_text("direct_url.json") or "{}")
    if not direct.get("dir_info", {}).get("editable"):
        pytest.skip("awb is not installed editable from a folder here")
    assert install_hint("embed") == f"pip install -e '{ROOT}[embed]'"
