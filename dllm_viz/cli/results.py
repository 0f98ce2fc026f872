"""A results file that grows one finished row at a time, so an error or Ctrl-C loses nothing.

`eval --out` (jsonl) and `bench --out` (csv) append each row as soon as it is scored, flushed to
disk; `--resume` reads what is there and the run skips those rows. The settings of the run are
kept beside the file (`<out>.settings.json`) and a resume with other settings is refused, so
one file never mixes two experiments; the settings include a fingerprint of a local model's files,
so a model retrained under the same name ("tiny") is refused too. Without `--resume` an existing file is never replaced.
A row cut in half by a kill is dropped (the file is cut back to its last whole row).
"""

from __future__ import annotations

import csv
import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

# Settings keys newer than some results files (see _check_settings).
ADDED_LATER = frozenset({"model_weights", "data", "points"})
# Settings keys whose order does not change a row: each row is one problem decoded on its own (the
# engine seeds a fresh generator from the decode seed for every decode), so the same problems listed
# in another order are the same run. Two `bench --tasks a,b` processes over disjoint --skip slices
# list a0 b0 | a1 b1, the whole run a0 a1 b0 b1: tools/merge_bench.py's joined file resumes under it.
ORDER_FREE = frozenset({"problems"})


class ResultsFile:
    """Rows already in `path` (when resuming) and an open handle to append new ones.

    Args:
        path: the --out file; its suffix picks the format (.csv, else jsonl).
        settings: what defines the run (model, prompts, configurations, decode settings).
        resume: continue an existing file instead of refusing it.
        columns: the csv header (ignored for jsonl).

    Raises:
        ValueError: the file exists without `resume`, its settings differ, or it cannot be
            written (the message names the path and the fix).
    """

    def __init__(self, path: Path, settings: Mapping[str, Any], *, resume: bool, columns: Sequence[str] = ()) -> None:
        self.path = path
        self.is_csv = path.suffix.lower() == ".csv"
        self.columns = list(columns)
        self.settings_path = settings_path(path)
        settings = as_saved(settings)
        if path.is_dir():
            raise ValueError(f"--out {str(path)!r} is a directory; give a file path such as {str(path / 'results')!r}")
        if path.exists() and not resume:
            raise ValueError(f"--out {str(path)!r} already exists; pass --resume to continue it, or choose another "
                             "path (finished results are never overwritten)")
        self.rows: list[dict[str, Any]] = []
        self._created = not path.exists()  # a file this run made and never wrote a row to is removed on close
        self._appended = 0
        if resume and path.exists():
            self._check_settings(settings)
            self.rows = self._read_rows()
        self._handle = self._open(settings)

    def _check_settings(self, settings: dict[str, Any]) -> None:
        try:
            saved = read_settings(self.path)
        except ValueError as exc:
            raise ValueError(f"cannot --resume: {exc}; choose a new --out") from None
        differ = differing_settings(saved, settings)
        if "model_weights" in differ:
            raise ValueError(f"cannot --resume {str(self.path)!r}: the files of model {settings.get('model')!r} "
                             "changed since its rows were written (it was retrained or replaced), so old and new "
                             "rows would mix two models; choose a new --out")
        if differ:
            raise ValueError(f"cannot --resume {str(self.path)!r} with other settings "
                             f"({show_differences(saved, settings, differ)}); rerun with the same options or "
                             "choose a new --out")

    def _read_rows(self) -> list[dict[str, Any]]:
        try:
            text, rows, whole = _parse(self.path, self.columns)
        except NotText as exc:  # not a file of ours at all: only another --out helps (this one is left as is)
            raise ValueError(f"cannot --resume {str(self.path)!r}: {exc}; choose another --out") from None
        except ValueError as exc:
            raise ValueError(f"cannot --resume {str(self.path)!r}: {exc}") from None
        if whole < len(text):  # a row cut short by a kill: drop it so the file ends on a whole row
            with self.path.open("r+", encoding="utf-8", newline="") as handle:
                handle.truncate(len(text[:whole].encode("utf-8")))
        return rows

    def _open(self, settings: dict[str, Any]) -> TextIO:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            handle = self.path.open("a", encoding="utf-8", newline="")
            write_settings(self.path, settings)
        except OSError as exc:
            raise ValueError(f"cannot write --out {str(self.path)!r} ({exc.strerror or exc.__class__.__name__}); "
                             "choose a writable path") from None
        if self.is_csv and handle.tell() == 0:
            csv.writer(handle).writerow(self.columns)
            handle.flush()
        return handle

    def append(self, row: Mapping[str, Any]) -> None:
        """Write one finished row and flush it to disk."""
        if self.is_csv:
            csv.writer(self._handle).writerow([row.get(c) for c in self.columns])
        else:
            self._handle.write(json.dumps(dict(row)) + "\n")
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self.rows.append(dict(row))
        self._appended += 1

    def close(self) -> None:
        """Close the file (rows written so far stay).

        A file this run created and wrote no row to is removed with its settings: a run that
        stopped before its first row (a configuration or model refused after --out was opened)
        would otherwise leave a header behind, and the corrected command would be refused with
        "already exists" (or, with --resume, "other settings").
        """
        self._handle.close()
        if self._created and not self._appended:
            self.path.unlink(missing_ok=True)
            self.settings_path.unlink(missing_ok=True)

    def __enter__(self) -> ResultsFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def settings_path(path: Path) -> Path:
    """Where the settings of results file `path` are kept: `<out>.settings.json` beside it."""
    return path.with_name(path.name + ".settings.json")


def write_settings(path: Path, settings: Mapping[str, Any]) -> None:
    """Write the settings of results file `path` (as --resume reads them back)."""
    settings_path(path).write_text(json.dumps(settings, indent=2, sort_keys=True))


def as_saved(settings: Mapping[str, Any]) -> dict[str, Any]:
    """`settings` as a settings file keeps them (JSON types, other values as text), so a run's
    settings compare equal to the ones read back from its file."""
    return json.loads(json.dumps(settings, default=str))


def read_settings(path: Path) -> dict[str, Any]:
    """The settings kept beside results file `path`.

    Raises:
        ValueError: the settings file is missing or not JSON (the message names it).
    """
    try:
        saved = json.loads(settings_path(path).read_text())
    except (OSError, ValueError):
        raise ValueError(f"the settings file {settings_path(path).name!r} of {str(path)!r} is missing or "
                         "unreadable, so its rows' settings are unknown") from None
    if not isinstance(saved, dict):
        raise ValueError(f"the settings file {settings_path(path).name!r} of {str(path)!r} holds no settings")
    return saved


def differing_settings(saved: Mapping[str, Any], settings: Mapping[str, Any],
                       ignore: frozenset[str] = frozenset()) -> list[str]:
    """Keys whose values differ between a file's saved settings and a run's, sorted, `ignore`
    left out. Files written before a key existed carry none: their rows are taken on trust.
    Keys in ORDER_FREE compare as multisets (see there)."""
    return sorted(k for k in {*saved, *settings} - ignore
                  if _comparable(k, saved.get(k)) != _comparable(k, settings.get(k))
                  and not (k in ADDED_LATER and k not in saved))


def _comparable(key: str, value: Any) -> Any:
    """`value` as compared for `key`: an ORDER_FREE list sorted (by its JSON text, so mixed values sort)."""
    if key in ORDER_FREE and isinstance(value, list):
        return sorted(json.dumps(item, sort_keys=True) for item in value)
    return value


def show_differences(saved: Mapping[str, Any], settings: Mapping[str, Any], keys: Sequence[str]) -> str:
    """The first three differing keys as 'key: <then> then, <now> now' (JSON, shortened)."""
    return ", ".join(f"{k}: {_short(saved.get(k))} then, {_short(settings.get(k))} now" for k in keys[:3])


def read_rows(path: Path, columns: Sequence[str]) -> tuple[list[dict[str, Any]], bool]:
    """The whole rows of a results file (.csv, else jsonl), read without changing it, and whether
    text follows them: a row still being written by a running command, or cut short by a kill, is
    left out (tools/bench_summary.py, tools/merge_bench.py, calibrate --dense-rows).

    A csv an earlier version wrote, whose columns are some of `columns` (a column was added since,
    e.g. `redundant_answer_refinement` in session 29), is read with the missing ones empty, so its
    summaries, merges and dense rows stay usable; only `--resume`, which appends rows, needs the
    file's columns to be this version's.

    Raises:
        ValueError: a file that is not UTF-8 text, a csv with columns `columns` lacks, or a jsonl
            line that is not JSON.
    """
    text, rows, whole = _parse(path, columns, older=True)
    return rows, whole < len(text)


class NotText(ValueError):
    """A results file that is not UTF-8 text, so no file dllm_viz wrote (e.g. --out named a binary)."""


def _parse(path: Path, columns: Sequence[str], *, older: bool = False) -> tuple[str, list[dict[str, Any]], int]:
    """The file's text, its whole rows and the length of the text they span (`older`: see read_rows).

    Raises:
        NotText: the file is not UTF-8 text.
        ValueError: see read_rows.
    """
    try:
        with path.open(encoding="utf-8", newline="") as handle:  # keep csv's \r\n as written
            text = handle.read()
    except UnicodeDecodeError:
        kind = "CSV" if path.suffix.lower() == ".csv" else "JSONL"
        raise NotText(f"it is not UTF-8 text, so not a results {kind} file") from None
    if path.suffix.lower() != ".csv":
        return text, *_jsonl_rows(text, path)
    rows, whole = _csv_rows(text, columns, older=older)
    return text, rows, whole


def _lines(text: str) -> list[str]:
    """Lines split at "\\n" only, each keeping it (str.splitlines also splits at \\x1c, \\u2028, ...)."""
    return [line for line in re.split(r"(?<=\n)", text) if line]


def _jsonl_rows(text: str, path: Path) -> tuple[list[dict[str, Any]], int]:
    """Rows of whole lines and the length of the text they span (a last line without its newline is cut)."""
    rows, end = [], 0
    for line_no, line in enumerate(_lines(text), start=1):
        if not line.endswith("\n"):
            break
        end += len(line)
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                raise ValueError(f"line {line_no} of {str(path)!r} is not JSON; repair or remove it") from None
    return rows, end


def _csv_rows(text: str, columns: Sequence[str], *, older: bool = False) -> tuple[list[dict[str, Any]], int]:
    """Rows that csv.writer finished (all columns, ending in its \\r\\n; answers may hold plain
    newlines inside quotes) and the length of the text they span, header included."""
    consumed = 0

    def lines():  # type: ignore[no-untyped-def]
        nonlocal consumed
        for line in _lines(text):
            consumed += len(line)
            yield line

    reader = csv.reader(lines())
    rows, end, header = [], 0, None
    for record in reader:
        if not text[:consumed].endswith("\r\n") or (header is not None and len(record) != len(header)):
            break
        if header is None:
            header = record
        else:
            rows.append(dict(zip(header, record, strict=True)))
        end = consumed
    if header is not None and list(header) != list(columns):
        if not (older and set(header) <= set(columns)):
            raise ValueError(f"the file's columns {header} are not this version's {list(columns)}: it was written "
                             "by another dllm_viz version; read it with that version or start a new file")
        missing = dict.fromkeys((column for column in columns if column not in header), "")
        rows = [{**missing, **row} for row in rows]
    return rows, end


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 80 else text[:79] + "…"
