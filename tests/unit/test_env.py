"""Every environment variable, parsed in one place (voicestream.env), and the JSON log format."""

from __future__ import annotations

import ast
import dataclasses
import io
import json
import logging
import re
import sys
from pathlib import Path

import pytest

from voicestream import env_doc
from voicestream.env import (
    LIMIT_VARIABLES,
    RETIRED,
    SETTINGS,
    VARIABLES,
    ConfigError,
    Env,
    ServerSettings,
    Setting,
    default_model_dir,
    limits,
    server_settings,
)
from voicestream.kokoro_server.logs import JsonFormatter, capture_json_logs, log_event, request_id_var, session_id_var
from voicestream.wire.bidi import Limits

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "src" / "voicestream"
DOC = ROOT / "docs" / "configuration.md"


def test_server_settings_from_env() -> None:
    settings = server_settings(
        Env(
            {
                "VOICESTREAM_BACKEND": "torch",
                "VOICESTREAM_MODEL_DIR": "/opt/ml/model",
                "VOICESTREAM_THREADS": "3",
                "VOICESTREAM_SYNTH_WORKERS": "4",
                "VOICESTREAM_LOG_LEVEL": "debug",
                "VOICESTREAM_HOST": "0.0.0.0",
                "VOICESTREAM_PORT": "9000",
            }
        )
    )
    assert settings == ServerSettings("0.0.0.0", 9000, "torch", Path("/opt/ml/model"), 3, 4, "DEBUG")
    assert server_settings(Env({})) == ServerSettings()


@pytest.mark.parametrize(
    "environ",
    [
        {"VOICESTREAM_THREADS": "two"},
        {"VOICESTREAM_SYNTH_WORKERS": "0"},
        {"VOICESTREAM_THREADS": "-1"},
        {"VOICESTREAM_BACKEND": "tensorflow"},
        {"VOICESTREAM_LOG_LEVEL": "chatty"},
        {"VOICESTREAM_PORT": "http"},
    ],
)
def test_bad_server_settings_name_the_variable(environ: dict[str, str]) -> None:
    (name,) = environ
    with pytest.raises(ConfigError, match=name):
        server_settings(Env(environ))


def test_limits_from_env() -> None:
    applied = limits(Env({"VOICESTREAM_MAX_TEXT_CHARS": "50", "VOICESTREAM_IDLE_TIMEOUT_S": "2.5"}))
    assert applied == Limits(max_text_chars=50, idle_timeout_s=2.5)
    assert limits(Env({})) == Limits()


@pytest.mark.parametrize(
    "environ",
    [
        {"VOICESTREAM_MAX_QUEUED": "many"},
        {"VOICESTREAM_MAX_QUEUED": "1.5"},
        {"VOICESTREAM_MAX_SESSIONS": "0"},
        {"VOICESTREAM_MAX_SESSION_S": "-1"},
        {"VOICESTREAM_IDLE_TIMEOUT_S": "inf"},
    ],
)
def test_bad_limits_in_env_are_rejected_clearly(environ: dict[str, str]) -> None:
    (name,) = environ
    with pytest.raises(ConfigError, match=name.removeprefix("VOICESTREAM_").lower() + "|" + name):
        limits(Env(environ))


def test_each_limit_variable_names_a_field_and_defaults_to_it() -> None:
    fields = {spec.name: spec.default for spec in dataclasses.fields(Limits)}
    assert set(LIMIT_VARIABLES) <= set(fields)
    assert all(name == f"VOICESTREAM_{field.upper()}" for field, name in LIMIT_VARIABLES.items())
    declared = {setting.name: setting for setting in SETTINGS}
    assert {field: declared[name].default for field, name in LIMIT_VARIABLES.items()} == {
        field: fields[field] for field in LIMIT_VARIABLES
    }


def test_the_settings_classes_take_their_defaults_from_the_declaration() -> None:
    """One statement of each default: ServerSettings() and an empty environment agree, field by field."""
    assert server_settings(Env({})) == ServerSettings()
    assert limits(Env({})) == Limits()


def test_each_variable_is_declared_once_and_retired_ones_are_not_read() -> None:
    names = [setting.name for setting in SETTINGS]
    assert len(names) == len(set(names)) == len(VARIABLES)
    assert not set(RETIRED) & set(names)
    with pytest.raises(KeyError, match="not declared"):
        Env({"VOICESTREAM_DECODER_WINDOWS": "off"}).text("VOICESTREAM_DECODER_WINDOWS")


def test_at_most_35_variables_are_for_a_user_to_set() -> None:
    """Issue 30: the experiment dials are constructor arguments; the platform's are counted apart."""
    user = [setting.name for setting in SETTINGS if setting.set_by == "user"]
    assert len(user) <= 35, user
    platform = {setting.name for setting in SETTINGS if setting.set_by == "platform"}
    assert {"AWS_REGION", "LAMBDA_TASK_ROOT", "XDG_CACHE_HOME"} <= platform


def test_a_retired_variable_that_is_still_set_is_reported() -> None:
    environ = {"VOICESTREAM_DECODER_WINDOWS": "off", "VOICESTREAM_PORT": "1", "REPLAY_TOKENS_PER_S": " "}
    assert Env(environ).retired() == ["VOICESTREAM_DECODER_WINDOWS"]


def test_a_setting_parses_its_own_type_and_names_itself_when_malformed() -> None:
    ratio: Setting[float] = Setting("VOICESTREAM_PORT", lambda name, raw: float(raw) / 2, 1.5, "x", "server")
    assert Env({}).get(ratio) == 1.5
    assert Env({"VOICESTREAM_PORT": " 3 "}).get(ratio) == 1.5


def test_an_undeclared_variable_cannot_be_read() -> None:
    with pytest.raises(KeyError, match="not declared"):
        Env({"VOICESTREAM_TYPO": "1"}).text("VOICESTREAM_TYPO")


def test_default_model_dir_follows_the_cache_home() -> None:
    assert default_model_dir(Env({"XDG_CACHE_HOME": "/c"})) == Path("/c/voicestream/kokoro-82m")
    assert default_model_dir(Env({"VOICESTREAM_MODEL_DIR": "/m", "XDG_CACHE_HOME": "/c"})) == Path("/m")


def test_nothing_but_env_reads_the_process_environment() -> None:
    """The environment is parsed in one place: any other module that touches os.environ (or
    os.getenv) fails here, naming the file and line."""
    offenders = []
    for path in sorted(SOURCE.rglob("*.py")):
        if path.name == "env.py" and path.parent == SOURCE:
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in ("environ", "getenv", "putenv")
                and isinstance(node.value, ast.Name)
                and node.value.id == "os"
            ):
                offenders.append(f"{path.relative_to(SOURCE)}:{node.lineno}")
    assert offenders == []


def test_the_configuration_doc_is_generated_from_the_declaration() -> None:
    """docs/configuration.md is `python -m voicestream.env_doc`'s output: regenerate it after
    changing a declaration (`make docs-config`)."""
    assert DOC.read_text() == env_doc.render()


def test_the_doc_has_a_row_per_variable_in_its_section_then_the_retired_ones() -> None:
    documented = re.findall(r"^\| `([A-Z_][A-Z0-9_]*)` \|", env_doc.render(), flags=re.MULTILINE)
    by_section = [setting.name for key in env_doc.SECTIONS for setting in SETTINGS if setting.section == key]
    assert documented == by_section + list(RETIRED)
    assert set(by_section) == set(VARIABLES)


def test_log_lines_are_json_with_both_ids() -> None:
    out = io.StringIO()
    handler = capture_json_logs(out)
    try:
        session_token = session_id_var.set("s1")
        log_event("session_open")
        request_token = request_id_var.set("r1")
        log_event("request_done", audio_ms=12.5, session_id="reserved keys are not overwritten")
        log_event("queued", request_id="r2", level=logging.WARNING)
        request_id_var.reset(request_token)
        session_id_var.reset(session_token)
    finally:
        logging.getLogger("voicestream").removeHandler(handler)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(line["event"], line["session_id"], line["request_id"]) for line in lines] == [
        ("session_open", "s1", None),
        ("request_done", "s1", "r1"),
        ("queued", "s1", "r2"),
    ]
    assert lines[1]["audio_ms"] == 12.5 and lines[2]["level"] == "WARNING"


def test_formatter_handles_foreign_records_and_exceptions() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.getLogger("uvicorn.error").makeRecord(
            "uvicorn.error", logging.ERROR, __file__, 1, "failed %s", ("x",), exc_info=sys.exc_info()
        )
    line = json.loads(JsonFormatter().format(record))
    assert line["event"] == "failed x" and line["logger"] == "uvicorn.error"
    assert "ValueError: boom" in line["exception"] and line["request_id"] is None
