"""A faithful mirror of the dataset as ErrLookup's exporter writes it (DATASET.md), built from
fixture records: `data/manifest.json` (the current form, or the older one), the gzipped compact
index, `repos.json`, one `repos/{owner}/{name}.json` per repository, and the site's own files
(`search/`, `info/`, `published.json`, `tags.json`) that are not records.

Every JSON file is what JavaScript's `JSON.stringify` writes (no spaces, non-ASCII as is), the
index is gzipped without a timestamp, and records are in the schema's key order with
`backgroundTag` always written, as upstream's `rowToErrorEntry` does.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DATASET_VERSION = "2026-11-29T20:00:00.000Z"
SCHEMA_KEYS = (
    "id",
    "repo",
    "slug",
    "errorCode",
    "errorMessage",
    "messagePattern",
    "errorType",
    "errorClass",
    "httpStatus",
    "severity",
    "filePath",
    "lineNumber",
    "sourceCode",
    "sourceCodeStart",
    "sourceCodeEnd",
    "githubUrl",
    "documentation",
    "triggerScenarios",
    "commonSituations",
    "solutions",
    "exampleFix",
    "handlingStrategy",
    "validationCode",
    "typeGuard",
    "tryCatchPattern",
    "preventionTips",
    "tags",
    "backgroundTag",
    "analyzedSha",
    "analyzedAt",
    "schemaVersion",
)


def stringify(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class Site:
    root: Path  # the folder the site serves; the dataset is in root/data
    records: list[dict[str, Any]]
    repos: list[str]

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def manifest(self) -> Path:
        return self.data / "manifest.json"

    def repo_file(self, repo: str) -> Path:
        owner, name = repo.split("/")
        return self.data / "repos" / owner / f"{name}.json"

    def edit_manifest(self, change: Any) -> None:
        manifest = json.loads(self.manifest.read_text())
        change(manifest)
        self.manifest.write_bytes(stringify(manifest))


def build_site(root: Path, records: list[dict[str, Any]], *, old_manifest: bool = False) -> Site:
    data = root / "data"
    data.mkdir(parents=True)
    by_repo: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        entry = {key: record.get(key) for key in SCHEMA_KEYS}
        by_repo[record["repo"]].append(entry)
    repos = sorted(by_repo)
    for repo in repos:
        owner, name = repo.split("/")
        (data / "repos" / owner).mkdir(parents=True, exist_ok=True)
        (data / "repos" / owner / f"{name}.json").write_bytes(stringify(by_repo[repo]))

    rows = [
        {
            "id": r["id"],
            "repo": r["repo"],
            "slug": r["slug"],
            "code": r["errorCode"],
            "msg": r["errorMessage"],
            "pattern": r["messagePattern"],
            "type": r["errorType"],
            "cls": r["errorClass"],
            "tags": r["tags"],
            "sev": r["severity"],
        }
        for repo in repos
        for r in by_repo[repo]
    ]
    index_raw = stringify({"schemaVersion": 2, "datasetVersion": DATASET_VERSION, "errors": rows})
    listing = stringify(
        [
            {
                "repo": repo,
                "description": f"The {repo.split('/')[1]} project — ünïcode and all",
                "language": "Python",
                "stars": 1000 + i,
                "sourceFiles": 10 * (i + 1),
                "defaultBranch": "main",
                "analyzedSha": "2e88108521a8e1c0b9b0ed8f5a04b29c21c2e9fc",
                "analyzedAt": "2026-11-29T20:00:00Z",
                "contentChangedAt": None,
                "errorCount": len(by_repo[repo]),
            }
            for i, repo in enumerate(repos)
        ]
    )
    (data / "repos.json").write_bytes(listing)
    site_files = _site_files(rows, repos)
    for relative, content in site_files.items():
        path = data / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)

    if old_manifest:
        (data / "index.json").write_bytes(index_raw)
        files: dict[str, Any] = {
            "index": {
                "path": "/data/index.json",
                "bytes": len(index_raw),
                "sha256": sha256(index_raw),
            }
        }
    else:
        index_gz = gzip.compress(index_raw, mtime=0)
        (data / "index.json.gz").write_bytes(index_gz)
        files = {
            "index": {
                "path": "/data/index.json.gz",
                "bytes": len(index_gz),
                "sha256": sha256(index_gz),
                "encoding": "gzip",
                "rawBytes": len(index_raw),
                "rawSha256": sha256(index_raw),
            },
            "repos": {"path": "/data/repos.json", "bytes": len(listing), "sha256": sha256(listing)},
        }
        for name, relative in (
            ("published", "published.json"),
            ("tags", "tags.json"),
            ("searchSummary", "search/summary.json"),
        ):
            content = site_files[relative]
            files[name] = {
                "path": f"/data/{relative}",
                "bytes": len(content),
                "sha256": sha256(content),
            }
    manifest = {
        "schemaVersion": 2,
        "datasetVersion": DATASET_VERSION,
        "counts": {"repos": len(repos), "errors": len(rows), "infoPages": 1},
        "files": files,
    }
    (data / "manifest.json").write_bytes(stringify(manifest))
    return Site(root, records, repos)


def _site_files(rows: list[dict[str, Any]], repos: list[str]) -> dict[str, bytes]:
    """The site's own search and info files, shaped as its exporter writes them."""
    codes: dict[str, list[int]] = defaultdict(list)
    for i, row in enumerate(rows):
        if row["code"]:
            codes[row["code"]].append(i)
    return {
        "search/summary.json": stringify(
            {"entryCount": len(rows), "tokenShards": 256, "metaChunk": 2000, "weightScale": 100}
        ),
        "search/codes.json": stringify(codes),
        "search/norms.json": stringify([300 + i for i in range(len(rows))]),
        "search/tokens/00.json": stringify({"error": [120, [0, 1, 2]]}),
        "search/tokens/a7.json": stringify({"tensor": [310, [3]]}),
        "search/ids/00.json": stringify({row["id"]: i for i, row in enumerate(rows[:5])}),
        # Rows shaped exactly like the index's: a walk that took them for records would
        # import every one a second time.
        "search/meta/0.json": stringify(rows),
        "info/index.json": stringify(
            [
                {
                    "slug": "shape-mismatch",
                    "title": "Shape mismatch",
                    "summary": "Arrays of different shapes.",
                    "errorCount": 3,
                    "repoCount": 2,
                    "generatedAt": "2026-11-29T20:00:00Z",
                }
            ]
        ),
        "info/shape-mismatch.json": stringify(
            {
                "slug": "shape-mismatch",
                "clusterKey": "shape-mismatch",
                "title": "Shape mismatch",
                "summary": "Arrays of different shapes.",
                "background": "…",
                "commonCauses": ["a"],
                "fixes": ["b"],
                "guideSlugs": [],
                "errorIds": [rows[0]["id"]],
                "errorCount": 3,
                "repoCount": 2,
                "generatedAt": "2026-11-29T20:00:00Z",
                "schemaVersion": 1,
            }
        ),
        "published.json": stringify(repos),
        "tags.json": stringify({"families": [{"tag": "shape-mismatch", "records": 3}]}),
    }
