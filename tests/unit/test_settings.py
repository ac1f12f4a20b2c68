"""settings.py: the function's environment read into Settings; every problem named."""

from __future__ import annotations

import pytest
from memory_hub.settings import ENVIRONMENT, SettingsError, from_environment
from pydantic import ValidationError

COMPLETE = {
    "AWS_REGION": "eu-west-1",
    "MEMORY_HUB_BUCKET": "bucket",
    "ASSETS_TABLE": "Assets",
    "ITEMS_TABLE": "Items",
    "SCENES_TABLE": "Scenes",
    "KEYS_TABLE": "Keys",
    "AUDIT_TABLE": "Audit",
    "IDEMPOTENCY_TABLE": "Idempotency",
    "MEMORY_HUB_TOKEN_SECRET_ARN": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:token",
}
REQUIRED = list(COMPLETE)


def _problem(environ: dict[str, str]) -> str:
    with pytest.raises(SettingsError) as caught:
        from_environment(environ)
    return str(caught.value)


def test_complete_environment():
    settings = from_environment(COMPLETE)
    assert settings.region == "eu-west-1"
    assert settings.bucket == "bucket"
    assert (
        settings.assets_table,
        settings.items_table,
        settings.scenes_table,
        settings.keys_table,
        settings.audit_table,
        settings.idempotency_table,
    ) == ("Assets", "Items", "Scenes", "Keys", "Audit", "Idempotency")
    assert settings.token_secret_id == COMPLETE["MEMORY_HUB_TOKEN_SECRET_ARN"]
    # defaults of the optional variables
    assert settings.bootstrap_key_secret_id is None
    assert settings.service_id == "default"
    assert settings.retention_days == 0
    assert (settings.retention_min_l0, settings.retention_min_l1) == (50, 20)
    assert settings.clear_budget_s == 24.0


def test_settings_are_frozen():
    settings = from_environment(COMPLETE)
    with pytest.raises(ValidationError):
        settings.bucket = "other"  # type: ignore[misc]


def test_empty_environment_names_every_missing_variable():
    message = _problem({})
    assert message.startswith("Memory Hub cannot start: ")
    for name in REQUIRED:
        assert f"{name} is not set" in message
    for optional in (
        "MEMORY_HUB_BOOTSTRAP_KEY_SECRET_ARN",
        "MEMORY_HUB_SERVICE_ID",
        "RETENTION_DAYS",
        "RETENTION_MIN_L0",
        "RETENTION_MIN_L1",
        "MEMORY_HUB_CLEAR_BUDGET_S",
    ):
        assert optional not in message
    assert "AWS_DEFAULT_REGION" not in message
    assert message.count("is not set") == len(REQUIRED)


@pytest.mark.parametrize("name", REQUIRED)
def test_each_missing_variable_is_named(name):
    environ = {k: v for k, v in COMPLETE.items() if k != name}
    assert _problem(environ) == f"Memory Hub cannot start: {name} is not set"


@pytest.mark.parametrize("name", REQUIRED)
def test_an_empty_variable_counts_as_missing(name):
    assert _problem({**COMPLETE, name: ""}) == f"Memory Hub cannot start: {name} is not set"


def test_two_missing_variables_are_both_named():
    environ = {k: v for k, v in COMPLETE.items() if k not in ("ITEMS_TABLE", "MEMORY_HUB_BUCKET")}
    message = _problem(environ)
    assert "ITEMS_TABLE is not set" in message
    assert "MEMORY_HUB_BUCKET is not set" in message


def test_region_prefers_aws_region():
    assert from_environment({**COMPLETE, "AWS_DEFAULT_REGION": "ap-south-1"}).region == "eu-west-1"


def test_region_falls_back_to_aws_default_region():
    environ = {k: v for k, v in COMPLETE.items() if k != "AWS_REGION"}
    assert from_environment({**environ, "AWS_DEFAULT_REGION": "ap-south-1"}).region == "ap-south-1"
    assert from_environment({**environ, "AWS_REGION": "", "AWS_DEFAULT_REGION": "ap-south-1"}).region == "ap-south-1"
    assert _problem({**environ, "AWS_DEFAULT_REGION": ""}) == "Memory Hub cannot start: AWS_REGION is not set"


@pytest.mark.parametrize("value", ["abc", "-1", "36501", "1.5", "ten"])
def test_invalid_retention_days_is_named(value):
    message = _problem({**COMPLETE, "RETENTION_DAYS": value})
    assert message.startswith("Memory Hub cannot start: RETENTION_DAYS: ")
    assert "is not set" not in message


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("RETENTION_MIN_L0", "-5"),
        ("RETENTION_MIN_L1", "x"),
        ("MEMORY_HUB_CLEAR_BUDGET_S", "901"),
        ("MEMORY_HUB_CLEAR_BUDGET_S", "soon"),
    ],
)
def test_other_invalid_values_are_named(name, value):
    assert _problem({**COMPLETE, name: value}).startswith(f"Memory Hub cannot start: {name}: ")


def test_missing_and_invalid_are_reported_together():
    environ = {k: v for k, v in COMPLETE.items() if k != "KEYS_TABLE"}
    message = _problem({**environ, "RETENTION_DAYS": "-1"})
    assert "KEYS_TABLE is not set" in message
    assert "RETENTION_DAYS: " in message


@pytest.mark.parametrize(("value", "days"), [("0", 0), ("30", 30), ("36500", 36500)])
def test_valid_retention_days(value, days):
    assert from_environment({**COMPLETE, "RETENTION_DAYS": value}).retention_days == days


def test_optional_values_are_read():
    settings = from_environment(
        {
            **COMPLETE,
            "MEMORY_HUB_SERVICE_ID": "svc",
            "RETENTION_MIN_L0": "0",
            "MEMORY_HUB_BOOTSTRAP_KEY_SECRET_ARN": "arn:bootstrap",
            "MEMORY_HUB_CLEAR_BUDGET_S": "2.5",
        }
    )
    assert (
        settings.service_id,
        settings.retention_min_l0,
        settings.bootstrap_key_secret_id,
        settings.clear_budget_s,
    ) == ("svc", 0, "arn:bootstrap", 2.5)


def test_every_field_has_a_variable():
    from memory_hub.settings import Settings

    assert set(ENVIRONMENT) == set(Settings.model_fields)
    assert len(set(ENVIRONMENT.values())) == len(ENVIRONMENT)
