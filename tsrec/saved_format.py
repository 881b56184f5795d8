"""The files of a saved model, whatever it holds: their names, the format versions this tsrec writes
and reads, their checksums, the layout and checks of ``weights.pt``'s tensors, and the errors a user
gets for a missing, foreign, newer, corrupted or edited folder. Knows no
:class:`~tsrec.fitted.FittedState`: :mod:`tsrec.saved_state` lays a state out in these files and
reads it back.

A saved model is a folder of two files: ``forecaster.json`` (the format and tsrec versions, what
the model is, and the SHA-256 of every file, itself included) and ``weights.pt`` (tensors only).
:func:`write_model` writes them atomically (:mod:`tsrec._saving`), :func:`read_model` reads them
back under the folder's lock, checks the format and the checksums, and turns whatever goes wrong
in rebuilding the model into a ``ValueError`` that says what to do.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch

from tsrec import _saving
from tsrec._hashing import sha256_of
from tsrec._saving import ConcurrentSaveError
from tsrec._version import __version__
from tsrec.data.frame import split_at

__all__ = ["CONFIG_FILE", "EXTRA_STATE", "FORMAT_VERSION", "HEADER", "READABLE_VERSIONS", "SCALER_ROWS", "WEIGHTS_FILE",
           "ConcurrentSaveError", "Inconsistent", "format_version", "json_sha256", "load_tensors", "named_as_built",
           "own_tensor", "pack_strings", "read_model", "series_arrays", "state_dict_mismatches", "unknown_keys",
           "unpack_strings", "write_model"]

_T = TypeVar("_T")

FORMAT = "tsrec-forecaster"
FORMAT_VERSION = 12
#: Model formats this tsrec reads: 4 (tsrec 0.1 before whole-model checksums; see
#: :func:`_verify_checksums`), 5 (the history as three tensors per series), 6 (the history packed
#: end to end), 7 (every per-series value in ``weights.pt``, :func:`tsrec.saved_state._tensors`;
#: before it ``forecaster.json`` held the ids, starts, scaler rows and static covariates), 8
#: (a conformal calibration, when fitted: ``forecaster.json``'s ``conformal`` and ``weights.pt``'s
#: ``conformal_*`` tensors, :class:`~tsrec.conformal.Calibration`) and 9 (the statistical models'
#: fitted parameters in the state dict, ``<module>._extra_state``,
#: :class:`~tsrec.models.parameters.Parameters`; a model saved before them has none and fits each
#: window, as it did) and 10 (``weights.pt``'s ``scaler_floor``: the series never forecast below 0,
#: :attr:`StandardScaler.floor <tsrec.data.scaling.StandardScaler>`; before it, none is) and 11 (a
#: calibration that pools its steps or learns after the fit: ``weights.pt``'s ``conformal_profile``
#: and the ``conformal`` entry's ``update`` and ``rolling``, :class:`~tsrec.conformal.Calibration`;
#: a calibration saved before them reads as one that neither pools nor learns, as it was) and 12
#: (``forecaster.json``'s ``data.integer_ids``: a long frame's integer ids, given back as integers,
#: :attr:`Panel.integer_ids <tsrec.data.Panel>`; before it, ids are text).
READABLE_VERSIONS = (4, 5, 6, 7, 8, 9, 10, 11, 12)
#: The format of a model without a calibration: 7, which a tsrec from before format 8 reads too.
UNCALIBRATED_VERSION = 7
#: The format of a calibrated model without fitted parameters.
CALIBRATED_VERSION = 8
#: The format of a model with fitted parameters and no floor.
PARAMETERS_VERSION = 9
#: The format of a model with a floor and no calibration that pools steps or learns.
FLOOR_VERSION = 10
#: The format of a model with a calibration that pools steps or learns and text ids.
PROFILE_VERSION = 11
#: The state dict's entries of a module's extra state (the statistical models' parameters, format 9).
EXTRA_STATE = "_extra_state"
CONFIG_FILE = "forecaster.json"
WEIGHTS_FILE = "weights.pt"
#: ``forecaster.json``'s entry with the SHA-256 of every file of the model, itself included.
CHECKSUMS = "sha256"
#: ``forecaster.json``'s entries that describe the file, not the model (format 4's ``weights_sha256`` too).
HEADER = frozenset({"format", "format_version", "tsrec_version", CHECKSUMS, "weights_sha256"})
#: The scaler's per-series rows (``[N, C]`` each), ``weights.pt``'s ``scaler_<name>`` since format 7.
SCALER_ROWS = ("loc", "scale", "low", "high", "floor")
#: The scaler rows a file of an earlier format may lack (its default: no floor).
LATER_ROWS = {"floor": FLOOR_VERSION}
#: ``weights.pt``'s tensors beside the state dict in format 7 (:func:`tsrec.saved_state._tensors`): dtype
#: and number of dimensions, checked before they are read (:func:`_check_tensors`).
SERIES_TENSORS: dict[str, tuple[torch.dtype, int]] = {
    "history_lengths": (torch.int64, 1), "history_values": (torch.float64, 2), "history_observed": (torch.bool, 2),
    "history_covariates": (torch.float64, 2), "item_ids": (torch.uint8, 1), "item_id_ends": (torch.int64, 1),
    "starts": (torch.int64, 1), **{f"scaler_{name}": (torch.float64, 2) for name in SCALER_ROWS},
    "static_real": (torch.float64, 2), "static_cat": (torch.uint8, 1), "static_cat_ends": (torch.int64, 1),
}


def write_model(path: str | os.PathLike, tensors: dict[str, Any], content: dict[str, Any]) -> Path:
    """Write a model into the directory ``path``: ``weights.pt`` holding ``tensors`` (the network's
    state dict and tensors only) and ``forecaster.json`` holding ``content`` under a header (the
    format version the model needs, :func:`format_version`; the tsrec version; the SHA-256 of every
    file, ``forecaster.json``'s over its canonical content, :func:`json_sha256`). Returns ``path``.

    Crash-safe and safe under concurrent saves and loads (:mod:`tsrec._saving`): the files are
    written into a hidden folder beside ``path`` that is renamed into place, under a lock,
    only when complete, so ``path`` always holds either the previous model or the new one,
    never a mixed or partial pair; the folders left by crashed saves are removed. An existing
    ``path`` is replaced only when it is a saved model (or empty); anything else there is
    refused, never deleted. Raises :class:`ConcurrentSaveError` when another process kept
    ``path`` locked for more than :data:`tsrec._saving.LOCK_TIMEOUT` seconds.
    """
    path = Path(path)
    if path.parent.is_dir():  # refused before any file is written, read under the lock: never mid-swap
        with _saving.folder_lock(path, exclusive=False):
            _require_replaceable(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _saving.staging_folder(path) as staging:
        torch.save(tensors, staging / WEIGHTS_FILE)
        meta = {"format": FORMAT, "format_version": format_version(tensors, content), "tsrec_version": __version__,
                **content}
        checksums = {file.name: sha256_of(file) for file in sorted(staging.iterdir())}
        meta[CHECKSUMS] = {**checksums, CONFIG_FILE: json_sha256(meta)}
        (staging / CONFIG_FILE).write_text(json.dumps(meta, indent=2))
        _saving.move_into_place(staging, path, _require_replaceable)
    return path


def format_version(tensors: dict[str, Any], content: dict[str, Any]) -> int:
    """The oldest format that holds a model of ``weights.pt``'s ``tensors`` and ``forecaster.json``'s
    ``content``, so that older tsrecs read what they can: :data:`FORMAT_VERSION` with integer ids,
    :data:`PROFILE_VERSION` with a calibration that pools its steps or learns (its
    ``conformal_profile``), :data:`FLOOR_VERSION` with a scaler
    floor, :data:`PARAMETERS_VERSION` with fitted parameters (extra states), else
    :data:`CALIBRATED_VERSION` with a conformal calibration and :data:`UNCALIBRATED_VERSION` without."""
    if content["data"].get("integer_ids"):
        return FORMAT_VERSION
    if "conformal_profile" in tensors:
        return PROFILE_VERSION
    if bool(torch.isfinite(tensors["scaler_floor"]).any()):
        return FLOOR_VERSION
    if any(key.endswith(EXTRA_STATE) for key in tensors["state_dict"]):
        return PARAMETERS_VERSION
    return CALIBRATED_VERSION if "conformal" in content else UNCALIBRATED_VERSION


def read_model(path: str | os.PathLike, build: Callable[[dict[str, Any], bytes], _T]) -> _T:
    """The model ``build`` makes of the folder ``path``'s ``forecaster.json`` (its content, as a
    dict) and ``weights.pt`` (its bytes, :func:`load_tensors`), read under the folder's lock and
    checked to be a format this tsrec reads and to match its checksums. Reads JSON and tensors only
    (no unpickling of arbitrary objects). ``ValueError`` for a missing, foreign or corrupted
    directory, a model edited after saving (a file that does not match its checksum, or one that
    ``build`` cannot rebuild: raise :class:`Inconsistent` to say why), and one saved by a newer
    tsrec; :class:`ConcurrentSaveError` when another process is saving to ``path`` for longer than
    the lock's timeout."""
    path = Path(path)
    with _saving.folder_lock(path, exclusive=False):  # a concurrent save never shows half its files
        meta, files = _read_saved(path)
    _verify_checksums(path, meta, files)
    try:
        return build(meta, files[WEIGHTS_FILE])
    except (KeyError, TypeError, AttributeError, IndexError, RuntimeError, EOFError, ValueError, OSError,
            pickle.UnpicklingError) as err:
        raise _unreadable(path, meta, err) from err


def load_tensors(meta: dict[str, Any], weights: bytes) -> dict[str, Any]:
    """``weights.pt``'s tensors (its bytes ``weights``; tensors only), checked against
    :data:`SERIES_TENSORS` in format 7 and later (:func:`_check_tensors`); ``meta``'s settings of a
    model saved before ``WindowConfig.scaling`` are completed in place (:func:`_settings_before_scaling`)."""
    _settings_before_scaling(meta)
    tensors = torch.load(io.BytesIO(weights), map_location="cpu", weights_only=True)
    if meta["format_version"] >= 7:
        _check_tensors(tensors, meta["format_version"])
    return tensors


def _settings_before_scaling(meta: dict[str, Any]) -> None:
    """Complete, in place, the settings of a file saved before ``WindowConfig.scaling`` existed: its
    scaler was fitted on the values as they were, i.e. ``scaling="standard"`` (its fences are
    unbounded, :meth:`StandardScaler.from_dict`), and a refit of its settings fits the same way."""
    for key in ("settings", "resolved_settings"):
        window = meta[key]["window"]
        if isinstance(window, dict) and "scaling" not in window:
            window["scaling"] = "standard"


def _check_tensors(tensors: dict[str, Any], version: int) -> None:
    """Refuse a format-7 (or later, ``version``) ``weights.pt`` whose per-series tensors are
    missing (but a scaler row of a later format than ``version``, :data:`LATER_ROWS`), of another
    dtype or number of dimensions than :data:`SERIES_TENSORS`, a history of another number of steps
    than ``history_lengths``, and strings whose ends do not cut their bytes (the shapes that depend
    on ``forecaster.json`` are :func:`tsrec.saved_state._inconsistencies`', the counts of series
    :func:`tsrec.saved_state._history`'s)."""
    optional = {f"scaler_{name}" for name, since in LATER_ROWS.items() if version < since}
    wrong = [f"{key} is {_described(tensors.get(key))}, not {str(dtype).removeprefix('torch.')} with {ndim} "
             f"dimension{'s' * (ndim > 1)}" for key, (dtype, ndim) in SERIES_TENSORS.items()
             if not (key in optional and key not in tensors)
             and not (isinstance(tensors.get(key), torch.Tensor) and tensors[key].dtype == dtype
                      and tensors[key].ndim == ndim)]
    if wrong:
        raise Inconsistent(f"{WEIGHTS_FILE}'s {'; '.join(wrong)}")
    lengths = tensors["history_lengths"]
    steps = {key: len(tensors[key]) for key in ("history_values", "history_observed", "history_covariates")}
    if set(steps.values()) != {int(lengths.sum())} or (lengths < 0).any():
        rows = ", ".join(f"{key} has {n} rows" for key, n in steps.items())
        raise Inconsistent(f"{WEIGHTS_FILE}'s history_lengths ({len(lengths)} series of {int(lengths.sum())} steps in "
                           f"all) do not cut its history: {rows}")
    for data, ends in (("item_ids", "item_id_ends"), ("static_cat", "static_cat_ends")):
        bounds = torch.cat([torch.zeros(1, dtype=torch.int64), tensors[ends]])  # [N + 1] from 0
        if (bounds.diff() < 0).any() or bounds[-1] != len(tensors[data]):
            raise Inconsistent(f"{WEIGHTS_FILE}'s {ends} are not where the strings of its {data} "
                               f"({len(tensors[data])} bytes) end, in order")


def _described(value: Any) -> str:
    """How :func:`_check_tensors` names what ``weights.pt`` holds under a key."""
    if not isinstance(value, torch.Tensor):
        return "missing" if value is None else type(value).__name__
    return f"{str(value.dtype).removeprefix('torch.')} {list(value.shape)}"


def named_as_built(name: str, tensors: dict[str, Any]) -> None:
    """Refuse a ``forecaster.json`` whose model ``name`` is not the one ``weights.pt`` was saved
    with (``model_name``; files saved before it have none, and nothing to compare): an edited name
    would run one model's network under another's (``patchtst``'s as ``rsa_patchtst``)."""
    saved = tensors.get("model_name")
    if saved is None:
        return
    built = bytes(saved.numpy()).decode("utf-8", "surrogatepass") if isinstance(saved, torch.Tensor) else saved
    if built != name:
        raise Inconsistent(f"{CONFIG_FILE} names the model {name!r}, but {WEIGHTS_FILE} holds the network of "
                           f"{built!r}")


def state_dict_mismatches(model: torch.nn.Module, saved: dict[str, torch.Tensor]) -> list[str]:
    """How the tensors ``saved`` differ from ``model``'s parameters and buffers: missing and
    unexpected names, and shapes (at most three of each kind)."""
    expected = {name: tuple(getattr(value, "shape", ())) for name, value in model.state_dict().items()}
    got = {name: tuple(getattr(value, "shape", ())) for name, value in saved.items()}  # extra states: checked at load
    missing = sorted(set(expected) - set(got))
    unexpected = sorted(set(got) - set(expected))
    shapes = [f"{name} is {list(got[name])} in {WEIGHTS_FILE} but {list(shape)} in the network"
              for name, shape in expected.items() if name in got and got[name] != shape]
    return ([f"the network has {_some(missing)}, missing from {WEIGHTS_FILE}"] if missing else []) + \
        ([f"{WEIGHTS_FILE} has {_some(unexpected)}, which the network does not"] if unexpected else []) + shapes[:3]


def _some(names: list[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def unknown_keys(saved: dict[str, Any], known: dict[str, Any], prefix: str = "") -> list[str]:
    """The keys of ``saved`` (nested dicts too, as dotted paths) that ``known`` does not have."""
    unknown = []
    for key, value in saved.items():
        if key not in known:
            unknown.append(prefix + str(key))
        elif isinstance(value, dict) and isinstance(known[key], dict):
            unknown += unknown_keys(value, known[key], f"{prefix}{key}.")
    return unknown


def pack_strings(texts: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """``texts`` ``[N]`` as two tensors: their UTF-8 bytes laid end to end ``[B]`` uint8, and where
    each text's bytes end ``[N]`` int64 (:func:`unpack_strings` reads them back). Lone surrogates
    (text decoded with ``errors="surrogateescape"``) are kept, as JSON kept them before format 7."""
    encoded = [text.encode("utf-8", "surrogatepass") for text in texts]
    ends = np.cumsum([len(part) for part in encoded], dtype=np.int64)  # [N]
    return torch.from_numpy(np.frombuffer(b"".join(encoded), dtype=np.uint8).copy()), torch.from_numpy(ends)


def unpack_strings(data: torch.Tensor, ends: torch.Tensor) -> list[str]:
    """The ``[N]`` texts that :func:`pack_strings` packed into ``data`` and ``ends``."""
    raw, bounds = data.numpy().tobytes(), ends.tolist()
    return [raw[start:end].decode("utf-8", "surrogatepass") for start, end in zip([0, *bounds[:-1]], bounds)]


def own_tensor(array: np.ndarray, dtype: type) -> torch.Tensor:
    """``array`` as a tensor of its own contiguous memory (a view would save its whole base)."""
    return torch.from_numpy(np.array(array, dtype=dtype, order="C", copy=True))


def series_arrays(tensors: dict[str, Any], *keys: str) -> list[list[np.ndarray]]:
    """Per key of ``weights.pt``, its arrays of each series: formats 6 and 7's packed
    ``[sum T_i, ...]`` tensor cut at ``history_lengths``, or formats 4 and 5's list of one tensor
    per series."""
    arrays = []
    for key in keys:
        saved = tensors[key]
        if isinstance(saved, list):
            arrays.append([part.numpy() for part in saved])
            continue
        lengths = tensors["history_lengths"].numpy()  # [N]
        if len(lengths) and (lengths == lengths[0]).all():  # every series as long (the usual case): one reshape
            arrays.append(list(saved.numpy().reshape(len(lengths), int(lengths[0]), *saved.shape[1:])))
        else:
            arrays.append(list(split_at(saved.numpy(), np.r_[0, np.cumsum(lengths)])))
    return arrays


def _require_replaceable(path: Path) -> None:
    """Refuse to replace ``path`` unless it is missing, an empty folder or a saved model."""
    if os.path.lexists(path) and not (path.is_dir() and (not any(path.iterdir()) or (path / CONFIG_FILE).is_file())):
        raise ValueError(f"{path} exists and is not a saved tsrec model; save into a new or empty folder "
                         "(tsrec replaces only a folder written by Forecaster.save)")


def json_sha256(meta: dict[str, Any]) -> str:
    """The SHA-256 of ``meta``'s content without its checksums, as canonical JSON (sorted keys, no
    spaces), so that the digest does not depend on the file's layout, only on what it says."""
    content = {key: value for key, value in meta.items() if key != CHECKSUMS}
    return hashlib.sha256(json.dumps(content, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _read_saved(path: Path) -> tuple[dict[str, Any], dict[str, bytes]]:
    """``forecaster.json``'s content, checked to be a format this tsrec reads, and the bytes of
    the model's other files (``weights.pt`` and any other file its checksums list)."""
    config_file = path / CONFIG_FILE
    if not config_file.is_file() or not (path / WEIGHTS_FILE).is_file():
        raise ValueError(f"{path} is not a saved tsrec Forecaster: expected {CONFIG_FILE} and {WEIGHTS_FILE} "
                         "written by Forecaster.save")
    try:
        meta = json.loads(config_file.read_bytes())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{config_file} is corrupted (not valid JSON: {err}); save the model again") from err
    _check_format(path, meta)
    listed = meta.get(CHECKSUMS) if meta["format_version"] >= 5 else None
    names = {WEIGHTS_FILE} | (set(listed) - {CONFIG_FILE} if isinstance(listed, dict) else set())
    unsafe = sorted(name for name in names if not isinstance(name, str) or Path(name).name != name
                    or name in ("", ".", ".."))
    if unsafe:
        raise ValueError(f"{config_file} lists files outside the model's folder ({unsafe}): it was edited or "
                         "corrupted after saving; save the model again from the Forecaster that fitted it, or fit again")
    try:
        return meta, {name: (path / name).read_bytes() for name in names}
    except FileNotFoundError as err:
        raise ValueError(f"{err.filename} is missing, but {CONFIG_FILE} lists it: the saved model is incomplete; "
                         "save it again from the Forecaster that fitted it, or fit again") from err


def _check_format(path: Path, meta: Any) -> None:
    """Refuse a JSON that is not a tsrec model, or one in a format this tsrec does not read."""
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValueError(f"{path / CONFIG_FILE} was not written by tsrec's Forecaster.save (format is "
                         f"{meta.get('format') if isinstance(meta, dict) else None!r})")
    version = meta.get("format_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > FORMAT_VERSION:
        raise ValueError(f"{path} was saved by a newer tsrec (version {meta.get('tsrec_version', 'unknown')}, "
                         f"model format {version}); upgrade tsrec to load it (tsrec {__version__} reads model "
                         f"formats up to {FORMAT_VERSION})")
    if version not in READABLE_VERSIONS:
        raise ValueError(f"{path} has format version {version!r}; this tsrec reads versions "
                         f"{', '.join(map(str, READABLE_VERSIONS))}. Use the tsrec version that saved it, or refit")


def _verify_checksums(path: Path, meta: dict[str, Any], files: dict[str, bytes]) -> None:
    """Refuse a model whose files do not match the checksums ``forecaster.json`` holds.

    Format 4 (written by tsrec 0.1 before format 5) holds the checksum of ``weights.pt`` only, as
    ``weights_sha256``; such models are still read, with only their weights checked here (their
    JSON is checked against the weights' shapes in :func:`tsrec.saved_state._from_saved`, as every
    model's is). Every later format (5 and up, :data:`READABLE_VERSIONS`) holds ``sha256``: every
    file's digest, ``forecaster.json``'s over its canonical content (:func:`json_sha256`); since format 7
    the per-series values are in ``weights.pt``, so its digest covers them.
    """
    if meta["format_version"] == 4:
        expected = {WEIGHTS_FILE: meta.get("weights_sha256")}
    else:
        expected = meta.get(CHECKSUMS)
        if not isinstance(expected, dict) or not {CONFIG_FILE, WEIGHTS_FILE} <= set(expected):
            raise ValueError(f"{path / CONFIG_FILE} has no checksum of {CONFIG_FILE} and {WEIGHTS_FILE} "
                             f"(its {CHECKSUMS!r} entry is {expected!r}): it was edited or corrupted after saving; "
                             "save the model again from the Forecaster that fitted it, or fit again")
    actual = {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}
    actual[CONFIG_FILE] = json_sha256(meta)
    changed = [name for name, digest in expected.items() if actual.get(name) != digest]
    if changed:
        raise ValueError(f"{' and '.join(str(path / name) for name in sorted(changed))} "
                         f"{'does' if len(changed) == 1 else 'do'} not match the checksum in {CONFIG_FILE}: the "
                         "saved model was edited or corrupted after saving. Save it again from the Forecaster "
                         "that fitted it, or fit again")


class Inconsistent(ValueError):
    """``forecaster.json`` and ``weights.pt`` do not describe one model (the message says where)."""


def _unreadable(path: Path, meta: dict[str, Any], err: Exception) -> ValueError:
    """The error for a model whose checksums match but that this tsrec cannot rebuild (``err``):
    a newer tsrec's, or one edited and given new checksums (or in format 4, which has none)."""
    detail = str(err) if isinstance(err, Inconsistent) else f"{type(err).__name__}: {err}"
    newer = _newer_tsrec(meta)
    if newer is not None:
        return ValueError(f"{path} was saved by a newer tsrec (version {newer}); upgrade tsrec to load it "
                          f"(tsrec {__version__} cannot read it: {detail})")
    return ValueError(f"{path} is corrupted or was edited after saving ({detail}); save the model again from the "
                      "Forecaster that fitted it, or fit again")


def _newer_tsrec(meta: dict[str, Any]) -> str | None:
    """The version of tsrec that saved ``meta`` when it is newer than this one, else None."""
    from packaging.version import InvalidVersion, Version

    saved = meta.get("tsrec_version")
    try:
        return saved if isinstance(saved, str) and Version(saved) > Version(__version__) else None
    except InvalidVersion:
        return None
