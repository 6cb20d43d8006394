from __future__ import annotations

from agents.conftest import fake_provider

__all__ = ["fake_provider"]
