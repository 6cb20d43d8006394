"""Opening the inventory the configuration names: what a failure to open it says."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from awb.config import Config
from awb.errors import InventoryUnreadable
from awb.inventory import open as inventory_open
from awb.inventory.open import open_store


def test_an_inventory_sqlite_cannot_open_is_inventory_unreadable_for_every_face(tmp_path: Path) -> None:
    # Before: the sqlite3 error itself, which the CLI's reindex and export reported as an internal error.
    (tmp_path / "inventory.db").mkdir()
    with pytest.raises(InventoryUnreadable, match="Is a directory"):
        open_store(Config(inventory_path=tmp_path / "inventory.db"))


@pytest.mark.parametrize("said", ["disk I/O error", "database or disk is full"])
def test_a_full_disk_is_named_when_sqlite_says_only_disk_io_error(
    tmp_path: Path, said: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SQLite cannot make its journal on a full disk, even to read: "disk I/O error" is all it says.
    real = os.statvfs

    def no_room(path: Any) -> Any:
        found = real(path)
        return os.statvfs_result((*found[:4], 0, *found[5:]))  # f_bavail

    monkeypatch.setattr(inventory_open.os, "statvfs", no_room)
    error = inventory_open.unopenable(tmp_path / "inventory.db", sqlite3.OperationalError(said))
    assert error.message.endswith(f"{said} (no space left on the device of {tmp_path})")
    monkeypatch.setattr(inventory_open.os, "statvfs", real)
    error = inventory_open.unopenable(tmp_path / "inventory.db", sqlite3.OperationalError(said))
    assert error.message.endswith(said)


def test_a_folder_that_cannot_be_made_is_named_with_the_systems_reason(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(InventoryUnreadable) as refused:
        open_store(Config(inventory_path=tmp_path / "file" / "inv" / "inventory.db"))
    # Before: "... inventory.db: [Errno 20] Not a directory: '.../file/inv'".
    assert refused.value.message == (
        f"cannot open the inventory {tmp_path}/file/inv/inventory.db: Not a directory: {tmp_path}/file/inv"
    )
