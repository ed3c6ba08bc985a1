"""The OpenAPI 3.1 document of the HTTP API, served at /openapi.json.

Written by hand next to the routes (Starlette has no models to generate it from); the tests run
schemathesis against a live server with it, so a route that drifts from it fails them.
"""

from __future__ import annotations

from typing import Any, Final

from kb import __version__

ERROR_TYPES: Final = ("exception", "error_code", "console", "http", "validation", "panic")
SEVERITIES: Final = ("critical", "error", "warning", "info")


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _error(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ref("Error")}}}


def _ok(description: str, schema: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ref(schema)}}}


_AUTH_ERRORS: Final = {
    "401": _error("No token, or the wrong one (only when the server has a token)."),
    "403": _error("The Host is not this machine (a server without a token answers localhost)."),
}
_NULLABLE_STRING: Final = {"type": ["string", "null"]}

SCHEMAS: Final[dict[str, Any]] = {
    "Error": {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["status", "code", "message"],
                "properties": {
                    "status": {"type": "integer"},
                    "code": {"type": "string"},
                    "message": {"type": "string"},
                },
            }
        },
    },
    "Record": {
        "description": "A record in the dataset's own keys (DATASET.md), unknown fields kept.",
        "type": "object",
        "required": ["id", "repo"],
        "properties": {
            "id": {"type": "string"},
            "repo": {"type": "string"},
            "errorMessage": {"type": "string"},
            "solutions": {"type": "array", "items": {"type": "string"}},
        },
        "additionalProperties": True,
    },
    "Match": {
        "type": "object",
        "required": ["id", "score", "method", "line", "end_line", "text", "captures", "evidence"],
        "properties": {
            "id": {"type": "string"},
            "score": {"type": "number", "minimum": 0, "maximum": 1},
            "method": {"type": "string"},
            "line": {"type": "integer", "minimum": 1},
            "end_line": {"type": "integer", "minimum": 1},
            "text": {"type": "string"},
            "captures": {"type": "array", "items": {"type": "string"}},
            "evidence": {"type": "array", "items": {"type": "string"}},
            "alternatives": {"type": "array", "items": {"type": "array"}},
            "duplicates": {"type": "array", "items": {"type": "string"}},
            "record": {"anyOf": [_ref("Record"), {"type": "null"}]},
        },
    },
    "MatchRequest": {
        "type": "object",
        "required": ["log"],
        "properties": {
            "log": {"type": "string", "description": "The log text."},
            "top": {"type": "integer", "minimum": 1, "maximum": 20, "default": 3},
            "min_score": {"type": "number", "minimum": 0, "maximum": 1, "default": 0.5},
        },
    },
    "Unmatched": {
        "description": "An error-looking line no record explains, with `kb search` hits.",
        "type": "object",
        "required": ["line", "text", "error_class", "frame", "suggestions"],
        "properties": {
            "line": {"type": "integer", "minimum": 1},
            "text": {"type": "string"},
            "error_class": {"type": ["string", "null"]},
            "frame": {"type": ["string", "null"]},
            "occurrences": {"type": "integer", "minimum": 1},
            "suggestions": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["id", "score", "errorMessage"],
                    "properties": {
                        "id": {"type": "string"},
                        "score": {"type": "number"},
                        "errorMessage": {"type": "string"},
                    },
                },
            },
        },
    },
    "MatchResponse": {
        "description": "The same object as `kb match --json` (matches best first).",
        "type": "object",
        "required": ["matches", "unmatched", "stats"],
        "properties": {
            "matches": {"type": "array", "items": _ref("Match")},
            "unmatched": {"type": "array", "items": _ref("Unmatched")},
            "stats": {"type": "object"},
        },
    },
    "SearchResponse": {
        "description": "The same object as `kb search --json`.",
        "type": "object",
        "required": ["results", "total", "query", "method"],
        "properties": {
            "results": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["id", "score", "repo", "slug", "errorMessage"],
                    "properties": {
                        "id": {"type": "string"},
                        "score": {"type": "number"},
                        "repo": {"type": "string"},
                        "slug": {"type": "string"},
                        "errorMessage": {"type": "string"},
                        "errorClass": _NULLABLE_STRING,
                        "errorCode": _NULLABLE_STRING,
                        "summary": {"type": "string"},
                    },
                },
            },
            "total": {"type": "integer", "minimum": 0},
            "query": _NULLABLE_STRING,
            "method": {"type": "string"},
            "didYouMean": _NULLABLE_STRING,
            "filters": {
                "type": "object",
                "description": "Each filter given (and a qualified class name in the query, as "
                "errorClass): the stored values it matched, whatever the case, by a "
                "repository's short name or a class's last name.",
                "additionalProperties": {"type": "array", "items": {"type": "string"}},
            },
        },
    },
    "RecordResponse": {
        "type": "object",
        "required": ["record", "datasetVersion"],
        "properties": {"record": _ref("Record"), "datasetVersion": _NULLABLE_STRING},
    },
    "Stats": {
        "description": "The same object as `kb stats --json`.",
        "type": "object",
        "required": ["records", "by_repo", "by_type", "by_severity", "revision"],
        "properties": {
            "records": {"type": "integer", "minimum": 0},
            "by_repo": {"type": "object", "additionalProperties": {"type": "integer"}},
            "by_type": {"type": "object", "additionalProperties": {"type": "integer"}},
            "by_severity": {"type": "object", "additionalProperties": {"type": "integer"}},
            "revision": {"type": "string"},
        },
    },
    "Health": {
        "type": "object",
        "required": ["status", "pid", "revision", "indexRevision", "records"],
        "properties": {
            "status": {"const": "ok"},
            "pid": {"type": "integer", "description": "The worker process that answered."},
            "revision": {"type": "string", "description": "The knowledge base's, last seen."},
            "indexRevision": {"type": "string", "description": "The matcher index's in use."},
            "records": {"type": "integer", "minimum": 0},
        },
    },
    "ImportReport": {
        "description": "The same object as `kb import --json`.",
        "type": "object",
        "required": ["inserted", "updated", "unchanged", "rejected", "errors"],
        "properties": {
            "inserted": {"type": "integer"},
            "updated": {"type": "integer"},
            "unchanged": {"type": "integer"},
            "rejected": {"type": "integer"},
            "errors": {"type": "array", "items": {"type": "object"}},
        },
    },
}


def _query(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "schema": schema,
        "description": description,
    }


def document() -> dict[str, Any]:
    """The OpenAPI document (a new dict each call: callers may not share mutations)."""
    top = {"type": "integer", "minimum": 1, "maximum": 20, "default": 3}
    min_score = {"type": "number", "minimum": 0, "maximum": 1, "default": 0.5}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "kb",
            "version": __version__,
            "description": "The error knowledge base: match logs, search and read records.",
        },
        "components": {
            "schemas": SCHEMAS,
            "securitySchemes": {"token": {"type": "http", "scheme": "bearer"}},
        },
        # The token is needed only when the server was started with one.
        "security": [{"token": []}, {}],
        "paths": {
            "/api/match": {
                "post": {
                    "summary": "Every known error in a log, like `kb match --json`.",
                    "parameters": [
                        _query("top", top, "Records per error (text/plain bodies)."),
                        _query("min_score", min_score, "Confidence needed (text/plain bodies)."),
                    ],
                    "requestBody": {
                        "required": True,
                        "content": {
                            "text/plain": {"schema": {"type": "string"}},
                            "application/json": {"schema": _ref("MatchRequest")},
                        },
                    },
                    "responses": {
                        "200": _ok("The errors found (possibly none).", "MatchResponse"),
                        "400": _error("The JSON body is not valid JSON."),
                        **_AUTH_ERRORS,
                        "413": _error("The body is over the size limit (--max-body)."),
                        "415": _error("Neither text/plain nor application/json."),
                        "422": _error("A value is missing or out of range."),
                        "504": _error("The match ran past the time limit (--match-timeout)."),
                    },
                }
            },
            "/api/search": {
                "get": {
                    "summary": "Records by words, id, slug or code and filters, like `kb search`.",
                    "parameters": [
                        _query("q", {"type": "string"}, "Words, an id, a slug or an error code."),
                        _query("repo", {"type": "string"}, "Only this repository (owner/name)."),
                        _query("tag", {"type": "string"}, "Only records with this tag."),
                        _query("error_class", {"type": "string"}, "Only this exception class."),
                        _query("code", {"type": "string"}, "Only this error code."),
                        _query("type", {"type": "string", "enum": list(ERROR_TYPES)}, "Type."),
                        _query("severity", {"type": "string", "enum": list(SEVERITIES)}, "Level."),
                        _query(
                            "limit",
                            {"type": "integer", "minimum": 1, "maximum": 1000, "default": 10},
                            "Results at most.",
                        ),
                    ],
                    "responses": {
                        "200": _ok("Results, best first (possibly none).", "SearchResponse"),
                        **_AUTH_ERRORS,
                        "422": _error("A filter or the limit is out of range."),
                    },
                }
            },
            "/api/records/{id}": {
                "get": {
                    "summary": "One record, wrapped as upstream's API and `kb import` have it.",
                    "parameters": [
                        {
                            "name": "id",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "string"},
                            "description": "The record's 16-hex id.",
                        }
                    ],
                    "responses": {
                        "200": _ok("The record.", "RecordResponse"),
                        **_AUTH_ERRORS,
                        "404": _error("No record has this id."),
                    },
                }
            },
            "/api/stats": {
                "get": {
                    "summary": "Totals by repository, type and severity, like `kb stats --json`.",
                    "responses": {"200": _ok("The figures.", "Stats"), **_AUTH_ERRORS},
                }
            },
            "/api/import": {
                "post": {
                    "summary": "Import records like `kb import` (only with --allow-import).",
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/octet-stream": {
                                "schema": {"type": "string", "format": "binary"}
                            },
                        },
                    },
                    "responses": {
                        "200": _ok("What the import did.", "ImportReport"),
                        "400": _error("The data could not be read at all (nothing stored)."),
                        **_AUTH_ERRORS,
                        "403": _error("Imports over HTTP are off, or the Host is not allowed."),
                        "413": _error("The body is over the import size limit."),
                    },
                }
            },
            "/healthz": {
                "get": {
                    "summary": "Whether this worker is up, and the revision it serves.",
                    "responses": {"200": _ok("Up.", "Health"), **_AUTH_ERRORS},
                }
            },
        },
    }
