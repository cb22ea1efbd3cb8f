"""The plug-in's keys in kv_connector_extra_config, in one table: name, default, meaning.

vLLM hands the spec the whole kv_connector_extra_config, its own keys (spec_name, spec_module_path,
block_size, ...) included. Every key of the plug-in starts with "hugepin_": such a key that is not
in the table is refused by name (a misspelt key would otherwise be ignored), as is a value that
does not parse. cpu_bytes_to_use is vLLM's own key, read as vLLM's CPU spec reads it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from hugepin.errors import InvalidArgumentError

_NAME = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}$")
_PAGE_SIZES = ("4K", "2M", "1G")


def _text(key: str, value) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidArgumentError(f"kv_connector_extra_config[{key!r}] = {value!r}: give a non-empty string")
    return value


def _arena(key: str, value) -> str:
    value = _text(key, value)
    if not _NAME.match(value):
        raise InvalidArgumentError(f"kv_connector_extra_config[{key!r}] = {value!r}: an arena name is 1-64 of "
                                   "[A-Za-z0-9._-], not starting with '.'")
    return value


def _page_size(key: str, value) -> str:
    value = _text(key, value).upper()
    if value not in _PAGE_SIZES:
        raise InvalidArgumentError(f"kv_connector_extra_config[{key!r}] = {value!r}: give one of "
                                   f"{', '.join(_PAGE_SIZES)}")
    return value


def _flag(key: str, value) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "yes", "1", "false", "no", "0"):
        return value.lower() in ("true", "yes", "1")
    raise InvalidArgumentError(f"kv_connector_extra_config[{key!r}] = {value!r}: give true or false")


def _seconds(key: str, value) -> float:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = math.nan
    if isinstance(value, bool) or not 0 < seconds < math.inf:
        raise InvalidArgumentError(f"kv_connector_extra_config[{key!r}] = {value!r}: give a positive number of "
                                   "seconds")
    return seconds


def _count(key: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgumentError(f"kv_connector_extra_config[{key!r}] = {value!r}: give an integer, 0 or more")
    return value


@dataclass(frozen=True)
class Option:
    key: str
    default: object
    parse: object  # (key, value) -> value
    meaning: str


OPTIONS = (
    Option("hugepin_arena", None, _arena,
           "the arena's name; default: 'vllm-' and the engine id (distinct per engine and DP rank)"),
    Option("hugepin_page_size", None, _page_size,
           "'4K' (shared memory), '2M' or '1G'; default: the largest the hugepage pool serves now"),
    Option("hugepin_strict", False, _flag,
           "true: creating the arena fails instead of falling back to another page size or NUMA node"),
    Option("hugepin_daemon_socket", None, _text,
           "hugepind's socket: the arena outlives the engine (kept, adopted by the next one, looked after "
           "by hugepind) and the manager's index of stored blocks is written at shutdown"),
    Option("hugepin_rendezvous_dir", "/dev/shm", _text,
           "where the rank processes leave their KV layout for the scheduler process"),
    Option("hugepin_rendezvous_timeout", 300.0, _seconds,
           "seconds the scheduler process waits for every rank's layout, and a rank for the arena"),
    Option("hugepin_time_copies", False, _flag,
           "time each job's copies on the GPU (TransferResult.transfer_time is then GPU time, else launch to "
           "landing); the timing events slow the copies beside them: a rank alone on an H200 moved 2-12% less "
           "with them, as vLLM's own handler's do (docs/performance.md)"),
    Option("hugepin_copy_threads", 0, _count,
           "CPU threads per copy of the host-memcpy backend (CPU tensors); 0: 1"),
)
_BY_KEY = {option.key: option for option in OPTIONS}


@dataclass(frozen=True)
class Options:
    """The plug-in's configuration, parsed from kv_connector_extra_config."""
    cpu_bytes: int
    arena: str | None
    page_size: str | None
    strict: bool
    daemon_socket: str | None
    rendezvous_dir: str
    rendezvous_timeout: float
    time_copies: bool
    copy_threads: int

    @classmethod
    def parse(cls, extra_config) -> Options:
        """Options from kv_connector_extra_config (a mapping). InvalidArgumentError names the key."""
        unknown = sorted(key for key in extra_config if str(key).startswith("hugepin_") and key not in _BY_KEY)
        if unknown:
            raise InvalidArgumentError(f"kv_connector_extra_config[{unknown[0]!r}]: not a hugepin.vllm key (known: "
                                       f"{', '.join(_BY_KEY)})")
        values = {}
        for option in OPTIONS:
            value = extra_config.get(option.key)
            values[option.key[len("hugepin_"):]] = option.default if value is None else option.parse(option.key, value)
        return cls(cpu_bytes=cpu_bytes_to_use(extra_config), **values)


def cpu_bytes_to_use(extra_config) -> int:
    """vLLM's cpu_bytes_to_use: the host budget of all ranks together, in bytes (a float is truncated,
    as vLLM's int() does)."""
    value = extra_config.get("cpu_bytes_to_use")
    if value is None:
        raise InvalidArgumentError("kv_connector_extra_config['cpu_bytes_to_use'] is missing: give the host memory "
                                   "for offloaded KV, in bytes, over all ranks")
    try:
        number = float(value) if not isinstance(value, int) else value
    except (TypeError, ValueError):
        number = math.nan
    if isinstance(value, bool) or not 0 < number < math.inf:
        raise InvalidArgumentError(f"kv_connector_extra_config['cpu_bytes_to_use'] = {value!r}: give a positive "
                                   "number of bytes")
    return int(number)
