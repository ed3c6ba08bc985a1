"""The dataset as the ErrLookup project publishes it (../DATASET.md): `manifest.json` in both
its forms, `repos.json` and the per-repository files it leads to, the site's own files
(`search/`, `info/`, ...) known and skipped, and where every path of a manifest resolves:
inside the mirror or the site it came from, never anywhere else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote, urljoin, urlsplit, urlunsplit

from kb.errors import InputError
from kb.ingest.reading import is_url

MANIFEST: Final = "manifest.json"
DATA_SUFFIXES: Final = (".json", ".jsonl", ".ndjson", ".txt")
INDEX_NAMES: Final = frozenset({"index.json", "index.json.gz"})
# The site's own files beside the dataset: read by its pages, not records.
SITE_FOLDERS: Final = {"search": "the site's search index", "info": "the site's info pages"}
SITE_FILES: Final = {
    "published.json": "the site's list of published repositories",
    "tags.json": "the site's tag vocabulary",
}
MANIFEST_MAX_BYTES: Final = 16 << 20  # upstream's is about 1 KB; kb's own list form is longer
_SCHEME_RE: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


@dataclass(frozen=True)
class ManifestEntry:
    """One file a manifest names, resolved to a path or URL, with what it promises."""

    name: str  # its key in upstream's `files` object, or its path in kb's list form
    location: str
    sha256: str | None = None
    raw_sha256: str | None = None  # of the decompressed JSON, when the file is gzipped
    size: int | None = None  # "bytes": as served
    raw_size: int | None = None  # "rawBytes": decompressed


@dataclass(frozen=True)
class Manifest:
    location: str
    dataset_version: str | None
    published: bool  # upstream's form: `files` keyed by name, paths from the site root
    entries: tuple[ManifestEntry, ...]

    def entry(self, name: str) -> ManifestEntry | None:
        return next((entry for entry in self.entries if entry.name == name), None)


def read_manifest(obj: dict[str, Any], location: str) -> Manifest:
    """A manifest's entries, each path resolved; InputError when one is malformed or would
    leave the mirror (nothing is imported then)."""
    files = obj["files"]
    published = isinstance(files, dict)
    listed: list[tuple[str, Any]] = (
        list(files.items()) if published else [(f"files[{i}]", e) for i, e in enumerate(files)]
    )
    entries = []
    for name, entry in listed:
        where = f"files.{name}" if published else name
        if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
            raise InputError(f"{location}: {where}: each entry needs a 'path'")
        entries.append(
            ManifestEntry(
                name=name if published else entry["path"],
                location=resolve_entry(location, entry["path"], where),
                sha256=_text_or_none(entry, "sha256", location, where),
                raw_sha256=_text_or_none(entry, "rawSha256", location, where),
                size=_count_or_none(entry, "bytes", location, where),
                raw_size=_count_or_none(entry, "rawBytes", location, where),
            )
        )
    version = obj.get("datasetVersion")
    return Manifest(
        location=location,
        dataset_version=version if isinstance(version, str) else None,
        published=published,
        entries=tuple(entries),
    )


def _text_or_none(entry: dict[str, Any], key: str, location: str, where: str) -> str | None:
    value = entry.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not re.fullmatch(r"[0-9a-fA-F]{64}", value):
        raise InputError(f"{location}: {where}: {key} must be 64 hex digits, got {value!r:.80}")
    return value.lower()


def _count_or_none(entry: dict[str, Any], key: str, location: str, where: str) -> int | None:
    value = entry.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(f"{location}: {where}: {key} must be a byte count, got {value!r:.80}")
    return value


def resolve_entry(manifest: str, path: str, where: str) -> str:
    """Where a manifest's path points. Paths from the site root (`/data/...`, upstream's) are
    read beside the manifest, which sits in `data/`; relative paths (kb's own list form) from
    the manifest's folder. Either way never outside that folder (or URL folder)."""
    segments = path.split("/")
    unsafe = (
        not path
        or "\\" in path
        or any(ord(c) < 0x20 for c in path)
        or path.startswith("//")
        or _SCHEME_RE.match(path) is not None
        or any(s in ("..", ".") or s.lower().replace("%2e", ".") == ".." for s in segments)
    )
    if unsafe:
        raise InputError(f"{manifest}: {where}: path {path!r} leaves the manifest's folder")
    absolute = path.startswith("/")
    if absolute:
        if segments[1] != "data" or len(segments) < 3:
            raise InputError(
                f"{manifest}: {where}: path {path!r} is outside the site's /data/ folder"
            )
        relative = "/".join(segments[2:])
    else:
        relative = path
    if is_url(manifest):
        base = _data_folder_url(manifest) if absolute else manifest
        return urljoin(base, quote(relative, safe="/"))
    folder = Path(manifest).parent
    resolved = folder / relative
    if not resolved.resolve().is_relative_to(folder.resolve()):
        raise InputError(f"{manifest}: {where}: path {path!r} leaves the manifest's folder")
    return str(resolved)


def _data_folder_url(manifest: str) -> str:
    """The URL of the site's `data/` folder: the manifest's own folder when it is served as
    `.../data/manifest.json` (a site or a mirror under a sub-path), else the origin's `/data/`
    (DATASET.md: absolute paths are from the origin)."""
    parts = urlsplit(manifest)
    served_in_data = parts.path.endswith("/data/" + MANIFEST)
    folder = parts.path[: -len(MANIFEST)] if served_in_data else "/data/"
    return urlunsplit((parts.scheme, parts.netloc, folder, "", ""))


def manifest_url(url: str) -> str:
    """The manifest of a site given by its address: `https://host/` and `https://host/data/`
    mean their `data/manifest.json`; any other URL is taken as it is."""
    parts = urlsplit(url)
    if not parts.path.endswith("/") and parts.path:
        return url
    folder = parts.path or "/"
    path = folder + (MANIFEST if folder.endswith("/data/") else "data/" + MANIFEST)
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def repository_file(listing: str, repo: str) -> str:
    """`data/repos/{owner}/{name}.json` beside the `repos.json` at `listing`."""
    owner, _, name = repo.partition("/")
    if any(part in ("", ".", "..") or "\\" in part or "/" in part for part in (owner, name)):
        raise InputError(f"{listing}: repository {repo!r} cannot name a file")
    if is_url(listing):
        return urljoin(listing, f"repos/{quote(owner, safe='')}/{quote(name, safe='')}.json")
    return str(Path(listing).parent / "repos" / owner / f"{name}.json")


def is_repository_entry(value: object) -> bool:
    """A row of `repos.json`: describes a repository, not an error."""
    return (
        isinstance(value, dict)
        and "errorCount" in value
        and "repo" in value
        and "errorMessage" not in value
        and "msg" not in value
    )


# --------------------------------------------------------------------------- folders


@dataclass
class InputPlan:
    """What `kb import PATH...` will read, in order, and what it passes over."""

    sources: list[str] = field(default_factory=list)
    walked: set[str] = field(default_factory=set)  # found in a folder: repos.json is metadata
    skipped: dict[str, int] = field(default_factory=dict)  # "folder: what" -> files
    empty: list[str] = field(default_factory=list)  # folders with no dataset file at all


def site_file_kind(path: Path) -> str | None:
    """What a file of the site's own is (its search index, info pages, ...), else None:
    recognised below a folder that holds the dataset (a `manifest.json` or `repos.json`)."""
    for folder in path.parents:
        if not ((folder / MANIFEST).is_file() or (folder / "repos.json").is_file()):
            continue
        parts = path.relative_to(folder).parts
        if len(parts) > 1 and parts[0] in SITE_FOLDERS:
            return SITE_FOLDERS[parts[0]]
        if len(parts) == 1 and parts[0] in SITE_FILES:
            return SITE_FILES[parts[0]]
        return None
    return None


def expand_inputs(specs: list[str] | tuple[str, ...]) -> InputPlan:
    """Files named, folders walked (one holding a manifest, or a `data/` folder that does,
    imports through it), stdin, URLs (a site's address means its manifest)."""
    plan = InputPlan()
    for spec in specs:
        if spec == "-":
            plan.sources.append(spec)
            continue
        if is_url(spec):
            plan.sources.append(manifest_url(spec))
            continue
        path = Path(spec)
        if path.is_dir():
            before = (len(plan.sources), sum(plan.skipped.values()))
            _expand_folder(path, plan)
            if (len(plan.sources), sum(plan.skipped.values())) == before:
                plan.empty.append(spec)
        elif path.exists():  # a file, or a pipe such as <(zcat f) or /dev/stdin
            kind = site_file_kind(path.absolute()) if path.is_file() else None
            if kind is None:
                plan.sources.append(spec)
            else:
                plan.skipped[f"{spec}: {kind}"] = 1
        else:
            raise InputError(f"{spec}: no such file or folder")
    return plan


def _expand_folder(path: Path, plan: InputPlan) -> None:
    for manifest in (path / MANIFEST, path / "data" / MANIFEST):
        if manifest.is_file():
            plan.sources.append(str(manifest))
            return
    found: list[Path] = []
    files = [
        p
        for p in sorted(path.rglob("*"))
        if p.is_file()
        and not any(part.startswith(".") for part in p.relative_to(path).parts)
        and p.name.removesuffix(".gz").endswith(DATA_SUFFIXES)
    ]
    # A folder below with a manifest of its own is imported through it, not file by file.
    mirrors = [p.parent for p in files if p.name == MANIFEST]
    for candidate in files:
        mirror = next((m for m in mirrors if candidate.is_relative_to(m)), None)
        if mirror is not None and candidate.name != MANIFEST:
            continue
        kind = site_file_kind(candidate.absolute())
        if kind is not None:
            folder = _site_folder(candidate, path)
            key = f"{folder}: {kind}"
            plan.skipped[key] = plan.skipped.get(key, 0) + 1
            continue
        found.append(candidate)
    # The compact index last: its rows then only fill in what full records did not cover.
    found.sort(key=lambda p: p.name in INDEX_NAMES)
    plan.sources.extend(str(p) for p in found)
    plan.walked.update(str(p) for p in found)


def _site_folder(path: Path, root: Path) -> str:
    """The folder to name in a "skipped" note: `data/search/` rather than each shard."""
    relative = path.relative_to(root).parts
    for depth, part in enumerate(relative[:-1]):
        if part in SITE_FOLDERS:
            return str(root.joinpath(*relative[: depth + 1])) + "/"
    return str(path)
