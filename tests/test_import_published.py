"""Importing the dataset exactly as ErrLookup publishes it: its manifest (both forms), the
index, repos.json and every repository's file, from a local mirror and over HTTP, with the
site's own files known and skipped, checksums kept, and an unchanged version not read twice."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kb import KnowledgeBase
from tests.conftest import corpus_records
from tests.published_site import DATASET_VERSION, Site, build_site

pytestmark = pytest.mark.databases  # each test on SQLite and on PostgreSQL


@pytest.fixture
def site(tmp_path: Path) -> Site:
    return build_site(tmp_path / "site", corpus_records())


def imported(invoke: Any, *args: str) -> tuple[Any, dict[str, Any]]:
    result = invoke("import", *args, "--json")
    return result, json.loads(result.stdout) if result.stdout.strip() else {}


def assert_whole_dataset(db_url: str, site: Site) -> None:
    """Every record stored in full (none left a stub), and each repository described."""
    with KnowledgeBase(str(db_url)) as kb:
        figures = kb.stats()
        assert figures["records"] == len(site.records)
        assert figures["stubs"] == 0
        assert [r["repo"] for r in figures["repositories"]] == site.repos
        for record in site.records[:5]:
            assert kb.get(record["id"]) == record


@pytest.mark.parametrize("where", ["root", "data", "manifest"])
def test_a_local_mirror_imports_every_record_in_full(
    invoke: Any, db_url: str, site: Site, where: str
) -> None:
    target = {"root": site.root, "data": site.data, "manifest": site.manifest}[where]
    result, summary = imported(invoke, str(target))
    assert result.exit_code == 0, result.stderr
    assert summary["inserted"] == len(site.records)
    assert (summary["rejected"], summary["errors"], summary["failed"]) == (0, [], [])
    assert summary["repositories"] == len(site.repos)
    assert summary["skipped"] == [
        f"{site.manifest}: published, tags, searchSummary skipped "
        "(the site's own files, not records)"
    ]
    assert_whole_dataset(db_url, site)


def test_the_published_site_over_http_imports_by_its_manifest_url_or_its_address(
    invoke: Any, db_url: str, site: Site, http_mirror: Any
) -> None:
    base = http_mirror(site.root)
    result, summary = imported(invoke, f"{base}/data/manifest.json")
    assert result.exit_code == 0, result.stderr
    assert summary["inserted"] == len(site.records)
    assert (summary["rejected"], summary["failed"]) == (0, [])
    assert_whole_dataset(db_url, site)
    # The site's address means its manifest; the version is imported already.
    result, summary = imported(invoke, f"{base}/")
    assert result.exit_code == 0
    assert summary["up_to_date"][0]["source"] == f"{base}/data/manifest.json"
    assert summary["up_to_date"][0]["dataset_version"] == DATASET_VERSION


def test_a_mirror_served_under_a_sub_path_resolves_the_manifest_paths_beside_it(
    invoke: Any, db_url: str, tmp_path: Path, http_mirror: Any
) -> None:
    site = build_site(tmp_path / "www" / "mirror", corpus_records(12))
    base = http_mirror(tmp_path / "www")
    result, summary = imported(invoke, f"{base}/mirror/data/manifest.json")
    assert result.exit_code == 0, result.stderr
    assert summary["inserted"] == len(site.records)
    assert_whole_dataset(db_url, site)


def test_the_older_manifest_form_imports_its_plain_index(
    invoke: Any, db_url: str, tmp_path: Path
) -> None:
    site = build_site(tmp_path / "site", corpus_records(), old_manifest=True)
    result = invoke("import", str(site.manifest), "--json")
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["inserted"] == len(site.records)
    assert "lists no repos.json" in result.stderr
    with KnowledgeBase(str(db_url)) as kb:
        assert kb.stats()["stubs"] == len(site.records)  # the index matches, documents nothing


@pytest.mark.parametrize(
    ("entry", "key", "what"),
    [
        ("index", "sha256", "sha256"),
        ("index", "rawSha256", "rawSha256"),
        ("repos", "sha256", "sha256"),
    ],
)
def test_a_wrong_checksum_is_refused_by_name_and_nothing_is_stored(
    invoke: Any, db_url: str, site: Site, http_mirror: Any, entry: str, key: str, what: str
) -> None:
    site.edit_manifest(lambda m: m["files"][entry].__setitem__(key, "0" * 64))
    name = "index.json.gz" if entry == "index" else "repos.json"
    for target in (str(site.manifest), f"{http_mirror(site.root)}/data/manifest.json"):
        result = invoke("import", target)
        assert result.exit_code == 2
        assert f"{name}: {what} mismatch: the manifest says {'0' * 64}" in result.stderr
        with KnowledgeBase(str(db_url)) as kb:
            assert kb.stats()["records"] == 0


def test_a_file_larger_than_announced_is_refused_before_it_is_parsed(
    invoke: Any, db_url: str, site: Site, http_mirror: Any
) -> None:
    site.edit_manifest(lambda m: m["files"]["repos"].__setitem__("bytes", 10))
    result = invoke("import", f"{http_mirror(site.root)}/data/manifest.json")
    assert result.exit_code == 2
    assert "repos.json: larger than the 10 bytes the manifest announces" in result.stderr


def test_a_repository_that_cannot_be_read_is_reported_and_the_rest_are_imported(
    invoke: Any, db_url: str, site: Site, http_mirror: Any, tmp_path: Path
) -> None:
    lost, broken = site.repos[0], site.repos[1]
    site.repo_file(lost).unlink()
    site.repo_file(broken).write_text('[{"id": "cut')
    lost_ids = {r["id"] for r in site.records if r["repo"] in (lost, broken)}
    base = http_mirror(site.root)
    result = invoke("import", f"{base}/data/manifest.json", "--json")
    assert result.exit_code == 1
    summary = json.loads(result.stdout)
    owner, name = lost.split("/")
    assert summary["failed"][0] == {
        "file": f"{base}/data/repos/{owner}/{name}.json",
        "reason": "HTTP 404 File not found",
    }
    assert "not valid JSON" in summary["failed"][1]["reason"]
    assert summary["inserted"] == len(site.records)  # the lost ones from the index, as stubs
    with KnowledgeBase(str(db_url)) as kb:
        assert kb.stats()["stubs"] == len(lost_ids)
    # Locally too, with the same counts.
    result = invoke("--db", str(tmp_path / "local.sqlite3"), "import", str(site.data))
    assert result.exit_code == 1
    assert f"{site.repo_file(lost)}: no such file" in result.stderr


@pytest.mark.parametrize(
    "path",
    [
        "/data/../../secret.json",
        "/etc/passwd",
        "http://elsewhere.example/data/index.json.gz",
        "//elsewhere.example/data/index.json.gz",
        "/data/%2e%2e/x.json",
        "data\\index.json.gz",
    ],
)
def test_a_manifest_path_that_leaves_the_mirror_is_refused(
    invoke: Any, db_url: str, site: Site, http_mirror: Any, path: str
) -> None:
    site.edit_manifest(lambda m: m["files"]["index"].__setitem__("path", path))
    for target in (str(site.manifest), f"{http_mirror(site.root)}/data/manifest.json"):
        result = invoke("import", target)
        assert result.exit_code == 2, result.output
        assert "files.index: path" in result.stderr
        with KnowledgeBase(str(db_url)) as kb:
            assert kb.stats()["records"] == 0


def test_an_unchanged_dataset_is_not_read_again_and_stats_say_when_it_was_fetched(
    invoke: Any, db_url: str, site: Site, http_mirror: Any
) -> None:
    url = f"{http_mirror(site.root)}/data/manifest.json"
    assert invoke("import", url).exit_code == 0
    again = invoke("import", url)
    assert again.exit_code == 0
    assert f"{url}: dataset {DATASET_VERSION} is imported already" in again.stderr
    assert "Use --force to import it again." in again.stderr
    with KnowledgeBase(str(db_url)) as kb:
        figures = kb.stats()
    assert figures["imports"] == 1  # a check that found nothing new is not an import
    [dataset] = figures["datasets"]
    assert (dataset["source"], dataset["dataset_version"]) == (url, DATASET_VERSION)
    assert dataset["checked_at"] >= dataset["fetched_at"]
    text = invoke("stats").stdout
    assert f"Dataset  {DATASET_VERSION} from {url}, fetched " in text
    # A new version is imported; --force reads an unchanged one again.
    site.edit_manifest(lambda m: m.__setitem__("datasetVersion", "2026-12-01T00:00:00.000Z"))
    newer = json.loads(invoke("import", url, "--json").stdout)
    assert (newer["unchanged"], newer["up_to_date"]) == (len(site.records), [])
    forced = json.loads(invoke("import", url, "--json", "--force").stdout)
    assert forced["unchanged"] == len(site.records)


def test_a_folder_without_a_manifest_skips_the_sites_own_files_with_one_line_each(
    invoke: Any, db_url: str, site: Site
) -> None:
    site.manifest.unlink()
    result = invoke("import", str(site.root))
    assert result.exit_code == 0, result.stderr
    notes = [line for line in result.stderr.splitlines() if line.startswith("note: ")]
    assert notes == [
        f"note: {site.data}/info/: the site's info pages: 2 files skipped (not records)",
        f"note: {site.data}/published.json: the site's list of published repositories: "
        "1 file skipped (not records)",
        f"note: {site.data}/search/: the site's search index: 7 files skipped (not records)",
        f"note: {site.data}/tags.json: the site's tag vocabulary: 1 file skipped (not records)",
    ]
    assert "rejected" in result.stderr and ", 0 rejected." in result.stderr
    assert_whole_dataset(db_url, site)
    # A file of the site's own named directly is passed over the same way.
    shard = site.data / "search" / "meta" / "0.json"
    result = invoke("import", str(shard))
    assert result.exit_code == 0
    assert f"note: {shard}: the site's search index: 1 file skipped" in result.stderr


def test_repos_json_named_directly_brings_in_the_repository_files(
    invoke: Any, db_url: str, site: Site
) -> None:
    result, summary = imported(invoke, str(site.data / "repos.json"))
    assert result.exit_code == 0, result.stderr
    assert (summary["inserted"], summary["repositories"]) == (len(site.records), len(site.repos))


def test_show_and_stats_describe_the_repository(invoke: Any, site: Site) -> None:
    invoke("import", str(site.root))
    record = site.records[0]
    text = invoke("show", record["id"]).stdout
    line = next(line for line in text.splitlines() if line.startswith("Repository "))
    owner_name = record["repo"]
    assert line.startswith(f"Repository {owner_name} · Python · ")
    assert "analysed at 2e88108521a8 on 2026-11-29" in line
    assert line.endswith(f"The {owner_name.split('/')[1]} project — ünïcode and all")
    markdown = invoke("show", record["id"], "--format", "markdown").stdout
    assert f"*{owner_name} · Python · " in markdown
    figures = json.loads(invoke("stats", "--json").stdout)
    described = {r["repo"]: r for r in figures["repositories"]}
    assert described[owner_name]["errorCount"] == sum(r["repo"] == owner_name for r in site.records)
    assert "contentChangedAt" in described[owner_name]  # unknown fields kept
    assert " stars" in invoke("stats").stdout


def test_a_bad_repos_json_row_is_rejected_by_name_and_the_others_are_kept(
    invoke: Any, db_url: str, tmp_path: Path, site: Site
) -> None:
    rows = json.loads((site.data / "repos.json").read_text())
    rows[1]["stars"] = -3
    path = tmp_path / "repos.json"
    path.write_text(json.dumps(rows))
    result = invoke("import", str(path), "--json")
    assert result.exit_code == 1
    summary = json.loads(result.stdout)
    assert summary["errors"][0] == {
        "file": str(path),
        "line": 1,
        "id": rows[1]["repo"],
        "field": "stars",
        "reason": "must be at least 0, got -3",
    }
    assert summary["repositories"] == len(rows) - 1


# ----------------------------------------------------------------- records upstream accepts

# A record in the shape of upstream's own schema fixture (packages/schema/fixtures/
# error-valid.json): a "$comment" key, no backgroundTag, a git sha, a Z timestamp.
SCHEMA_FIXTURE_SHAPE: dict[str, Any] = {
    "$comment": "Valid ErrorEntry fixture: an HTTP client's bad-status error.",
    "id": "a1b2c3d4e5f60718",
    "repo": "example-org/http-client",
    "slug": "err-bad-status",
    "errorCode": "ERR_BAD_STATUS",
    "errorMessage": "Request failed with status code {status}",
    "messagePattern": "Request failed with status code (.+?)",
    "errorType": "http",
    "errorClass": "HttpClientError",
    "httpStatus": 416,
    "severity": "error",
    "filePath": "lib/core/settle.js",
    "lineNumber": 18,
    "sourceCode": "\n".join(f"line {n}" for n in range(12, 26)),
    "sourceCodeStart": 12,
    "sourceCodeEnd": 25,
    "githubUrl": "https://github.com/example-org/http-client/blob/"
    "2e88108521a8e1c0b9b0ed8f5a04b29c21c2e9fc/lib/core/settle.js#L18",
    "documentation": "The client rejects when the status fails `validateStatus`.",
    "triggerScenarios": "Calling an endpoint that answers 404, 500 or 416.",
    "commonSituations": "The server is down, a route is missing, a token expired.",
    "solutions": ["Inspect the response status.", "Relax validateStatus for 4xx."],
    "exampleFix": "// before\nawait get(url)\n// after\ntry { await get(url) } catch {}",
    "handlingStrategy": "try-catch",
    "validationCode": "function ok(s) { return s < 400 }",
    "typeGuard": None,
    "tryCatchPattern": "try { ... } catch (e) { ... }",
    "preventionTips": ["Set validateStatus per call."],
    "tags": ["http", "network"],
    "analyzedSha": "2e88108521a8e1c0b9b0ed8f5a04b29c21c2e9fc",
    "analyzedAt": "2026-07-14T00:00:00Z",
    "schemaVersion": 2,
}

UPSTREAM_VALID_VARIANTS: dict[str, dict[str, Any]] = {
    "no backgroundTag": {"backgroundTag": None},  # None here: the key is removed
    "null lines": {
        "lineNumber": None,
        "sourceCode": None,
        "sourceCodeStart": None,
        "sourceCodeEnd": None,
    },
    "null line, known window": {"lineNumber": None, "sourceCodeStart": 3, "sourceCodeEnd": 9},
    "whitespace text": {
        "documentation": " ",
        "triggerScenarios": "\n",
        "commonSituations": "\t ",
        "errorClass": " ",
        "errorCode": " ",
    },
    "whitespace message": {"errorMessage": " ", "messagePattern": " ", "slug": "error"},
    "git url": {"githubUrl": "git://example.org/repo.git"},
    "mailto url": {"githubUrl": "mailto:maintainers@example.org"},
    "javascript url": {"githubUrl": "javascript:alert(document.cookie)"},
    "file url": {"githubUrl": "file:///src/lib/core/settle.js"},
    "unusual repo": {"repo": "Ünïcode.Org/naïve+lib~2"},
    "symbols in repo": {"repo": "o@x!/y#z(1)"},
}


@pytest.mark.parametrize("variant", sorted(UPSTREAM_VALID_VARIANTS))
def test_records_upstream_accepts_are_stored_and_exported_unchanged(
    invoke: Any, db_url: str, tmp_path: Path, variant: str
) -> None:
    record = corpus_records(1)[0]
    for key, value in UPSTREAM_VALID_VARIANTS[variant].items():
        if variant == "no backgroundTag":
            del record[key]
        else:
            record[key] = value
    path = tmp_path / "one.json"
    path.write_text(json.dumps({"record": record, "datasetVersion": DATASET_VERSION}))
    result = invoke("import", str(path), "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["inserted"] == 1
    exported = json.loads(invoke("export").stdout)
    assert exported == {**record, "backgroundTag": record.get("backgroundTag")}
    # Shown, matched and searched like any other record.
    assert invoke("show", record["id"]).exit_code == 0
    assert invoke("match", str(path)).exit_code in (0, 1)


def test_a_non_http_link_is_kept_but_never_shown_as_a_link(invoke: Any, tmp_path: Path) -> None:
    record = corpus_records(1)[0]
    record["githubUrl"] = "javascript:alert(document.cookie)"
    path = tmp_path / "one.json"
    path.write_text(json.dumps(record))
    invoke("import", str(path))
    markdown = invoke("show", record["id"], "--format", "markdown").stdout
    assert "](<javascript:" not in markdown and "](javascript:" not in markdown


def test_upstreams_schema_fixture_shape_is_stored_and_exported_with_its_defaults(
    invoke: Any, tmp_path: Path
) -> None:
    path = tmp_path / "error-valid.json"
    path.write_text(json.dumps(SCHEMA_FIXTURE_SHAPE, indent=2))
    result = invoke("import", str(path), "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["inserted"] == 1
    exported = json.loads(invoke("export").stdout)
    # The documented default: an absent backgroundTag is null. The comment is kept.
    assert exported == {**SCHEMA_FIXTURE_SHAPE, "backgroundTag": None}
    assert invoke("match", "-", input="Request failed with status code 416\n").exit_code == 0


def test_the_library_reports_progress_repository_by_repository(db_url: str, site: Site) -> None:
    calls: list[tuple[int, int, str]] = []
    with KnowledgeBase(str(db_url)) as kb:
        report = kb.import_sources(
            [str(site.root)],
            on_repository=lambda done, total, repo: calls.append((done, total, repo)),
        )
    assert report.inserted == len(site.records)
    total = len(site.repos)
    assert calls == [(n, total, repo) for n, repo in enumerate(site.repos, start=1)]


def test_a_record_without_a_line_matches_by_its_message_and_by_a_frame_in_its_file(
    invoke: Any, tmp_path: Path
) -> None:
    record = next(r for r in corpus_records() if r["repo"] == "numpy/numpy")
    record = {**record, "lineNumber": None, "sourceCodeStart": None, "sourceCodeEnd": None}
    unknown = {
        **corpus_records(2)[1],
        "filePath": "unknown",
        "lineNumber": None,
        "sourceCodeStart": None,
        "sourceCodeEnd": None,
    }
    path = tmp_path / "records.jsonl"
    path.write_text(json.dumps(record) + "\n" + json.dumps(unknown) + "\n")
    assert invoke("import", str(path)).exit_code == 0
    message = "ValueError: The order of integration must be non-negative"
    assert record["errorMessage"] == "The order of integration must be non-negative"
    bare = json.loads(invoke("match", "-", "--json", input=message + "\n").stdout)
    assert [m["id"] for m in bare["matches"]] == [record["id"]]
    traceback = (
        "Traceback (most recent call last):\n"
        '  File "/app/fit.py", line 3, in <module>\n'
        "    lag.lagint(c, m=-1)\n"
        f'  File "/usr/lib/python3.11/site-packages/{record["filePath"]}", line 700, in lagint\n'
        '    raise ValueError("The order of integration must be non-negative")\n'
        f"{message}\n"
    )
    framed = json.loads(invoke("match", "-", "--json", input=traceback).stdout)
    [match] = framed["matches"]
    assert match["id"] == record["id"]
    assert f"frame:{record['filePath']}:700" in match["evidence"]
    assert match["score"] > bare["matches"][0]["score"]
