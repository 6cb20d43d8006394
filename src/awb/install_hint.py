"""How to install one of awb's extras, said the way this copy of awb was installed.

From a clone (`pip install -e .`, what `make run` does) the extra must come from the clone too:
`pip install 'agent-workbench[embed]'` would look for the package on the index instead, and replace
the clone's code with a release, or fail where there is no index. pip records an install from a folder
in the distribution's `direct_url.json` (PEP 610); anything else is an install from the index.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import metadata
from urllib.parse import unquote, urlparse

DISTRIBUTION = "agent-workbench"


def install_hint(extra: str) -> str:
    """The command that installs `extra` into this copy of awb."""
    folder = _installed_from_folder()
    if folder is None:
        return f"pip install '{DISTRIBUTION}[{extra}]'"
    editable = "-e " if folder[1] else ""
    return f"pip install {editable}'{folder[0]}[{extra}]'"


@cache
def _installed_from_folder() -> tuple[str, bool] | None:
    """(the folder, editable?) when pip installed awb from a local folder; None otherwise."""
    try:
        recorded = metadata.distribution(DISTRIBUTION).read_text("direct_url.json")
        if recorded is None:
            return None
        direct = json.loads(recorded)
    except (metadata.PackageNotFoundError, ValueError, OSError):
        return None
    if not isinstance(direct, dict) or "dir_info" not in direct:
        return None  # an archive or a VCS URL: say the index's name
    url = urlparse(str(direct.get("url", "")))
    if url.scheme != "file" or not url.path:
        return None
    info = direct["dir_info"]
    return unquote(url.path), bool(isinstance(info, dict) and info.get("editable"))
