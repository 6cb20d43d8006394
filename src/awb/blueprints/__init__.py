"""Agent blueprints: YAML agents (head, arms, legs, heart, spine) validated and compiled to `awb.agents`."""

from awb.blueprints.schema import Blueprint, validate_blueprint

__all__ = ["Blueprint", "validate_blueprint"]
