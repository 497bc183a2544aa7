"""The documented request bodies: creation (one exact shape per method), rows, columns.

The service validates bodies itself (``Selectors.lifecycle.create``, each method's
``resolve_params``, ``service.wire``), with messages that say what was expected; these
schemas only *document* that validation in OpenAPI, precisely enough that a body valid for the
schema is accepted unless it breaks a rule a JSON Schema cannot state. Those answer 422 with a
type that says so: ``inconsistent`` (fields contradict each other: ragged rows, a CSR whose
parts disagree, names as many as features), ``selector-mismatch`` (rows of another width than
the selector's, labels for an unlabelled method), ``invalid-params`` (``k < ell``) or
``state-too-large``. The contract test (``tests/contract``) holds the two to each other.
"""

from __future__ import annotations

from typing import Any

from service.algorithms import METHODS
from service.algorithms.base import MAX_ABS_VALUE, AnyMethod, Mergeable
from service.api.schemas import NAME_PATTERN
from service.selectors.lifecycle import MAX_EXPIRES_AFTER, STREAM_STARTS
from service.store.records import MAX_PARTITIONS
from service.wire.kinds import (
    CHUNK_FORMATS,
    MAX_FEATURES,
    STREAM_FLAGS,
    ChunkFormat,
    chunk_format,
)
from service.wire.media import ARROW, CSV
from service.wire.names import FEATURE_NAMES, MAX_NAME_LENGTH
from service.wire.rows import MAX_CHUNK_ROWS


def documented_params(
    method: AnyMethod, kind: ChunkFormat
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The method's ``params_schema`` (derived from its ``MethodParams``: the defaults that hold
    at every size are in it) and the parameters it resolves to for the kind's example, which
    show the computed defaults at that size."""
    shape = kind.shape(kind.example(), method.name)
    example = method.resolve_params(dict(shape.params), shape.size).as_params()
    properties = method.params_schema["properties"]
    # A null parameter means "computed from the data"; the example leaves it out (OpenAPI
    # examples drop nulls anyway).
    shown = {k: v for k, v in example.items() if k in properties and v is not None}
    return method.params_schema, shown


#: A name's property in a creation body (a selector's, a stream's).
NAME_PROPERTY = {
    "type": "string",
    "pattern": NAME_PATTERN,
    "description": "1-128 letters, digits, '.', '_' or '-', starting with a letter or digit.",
}
#: The properties every selector's creation may have besides its method's.
LIFETIME_PROPERTIES = {
    "expires_after": {
        "type": "number",
        "minimum": 1,
        "maximum": MAX_EXPIRES_AFTER,
        "description": "Seconds without a commit after which the service deletes the "
        "selector (for one a job makes and forgets); not with partitions.",
    },
    "temporary": {
        "type": "boolean",
        "default": False,
        "description": "A job's selector, deleted when the job is done (a scikit-learn "
        "fit): listings mark it, and GET /v1/selectors?temporary=false leaves it out.",
    },
}
#: ``partitions``, which only methods whose states merge take.
PARTITIONS_PROPERTY = {
    "type": "integer",
    "minimum": 1,
    "maximum": MAX_PARTITIONS,
    "default": 1,
    "description": "Partitions learning in parallel, each with its own log and "
    "applier; reads merge them.",
}
#: A creation attached to a stream: the stream's shape and names, no shape of its own.
ATTACHED_PROPERTIES = {
    "stream": {
        "type": "string",
        "pattern": NAME_PATTERN,
        "description": "Attach to this stream: take its shape and names, and apply "
        "every chunk pushed to it (the stream's chunks must feed this method).",
    },
    "from": {
        "type": "string",
        "enum": list(STREAM_STARTS),
        "default": "start",
        "description": "start: every chunk the stream still holds; now: the chunks "
        "pushed from now on.",
    },
}


def create_request_body() -> dict[str, Any]:
    """The OpenAPI ``requestBody`` of ``POST /v1/selectors``: for every registered method, its
    chunk kind's shape (``ChunkFormat.create_schema``) and its ``params_schema`` with the defaults
    that hold for every size; one example per method, with the parameters it resolves to."""
    shapes = []
    examples = {}
    for name, method in METHODS.items():
        kind = chunk_format(method.chunk_kind)
        params_schema, example_params = documented_params(method, kind)
        shape = kind.create_schema()
        named = {"name": NAME_PROPERTY, "method": {"type": "string", "const": name}}
        params = {"params": {"anyOf": [params_schema, {"type": "null"}]}}
        properties = {**named, **shape["properties"], **params, **LIFETIME_PROPERTIES}
        if isinstance(method, Mergeable):
            properties["partitions"] = PARTITIONS_PROPERTY
        shapes.append(
            {**shape, "properties": properties, "required": ["name", "method", *shape["required"]]}
        )
        shapes.append(
            {
                "type": "object",
                "properties": {**named, **ATTACHED_PROPERTIES, **params},
                "required": ["name", "method", "stream"],
                "additionalProperties": False,
            }
        )
        examples[name] = {
            "summary": f"{name}, with the parameters its defaults resolve to at this size",
            "value": {
                "name": f"my-{name}",
                "method": name,
                **kind.example(),
                "params": example_params,
            },
        }
    examples["attached"] = {
        "summary": "an ocfs selector attached to stream 'clicks', from the oldest chunk it holds",
        "value": {"name": "clicks-ocfs", "method": "ocfs", "stream": "clicks", "from": "start"},
    }
    return {
        "required": True,
        "content": {"application/json": {"schema": {"oneOf": shapes}, "examples": examples}},
    }


# -- chunks -----------------------------------------------------------------------------------

#: A value of a chunk: JSON has no NaN or infinity; the magnitude limit keeps methods finite.
VALUE = {"type": "number", "minimum": -MAX_ABS_VALUE, "maximum": MAX_ABS_VALUE}
NONNEGATIVE_VALUE = {"type": "number", "minimum": 0, "maximum": MAX_ABS_VALUE}
COUNT = {"type": "integer", "minimum": 0, "maximum": 2**53}


def _dense(value: dict[str, Any]) -> dict[str, Any]:
    """Rows of values, all of the same length (which the schema cannot say)."""
    return {
        "type": "array",
        "minItems": 1,
        "maxItems": MAX_CHUNK_ROWS,
        "items": {"type": "array", "minItems": 1, "items": value},
    }


def _csr(value: dict[str, Any], whole_chunk: bool = False) -> dict[str, Any]:
    """A CSR object; ``whole_chunk``: a chunk by itself (not a view), which may carry labels
    and name its columns."""
    properties: dict[str, Any] = {
        "shape": {
            "type": "array",
            "prefixItems": [
                {**COUNT, "minimum": 1, "maximum": MAX_CHUNK_ROWS},
                {**COUNT, "minimum": 1, "maximum": MAX_FEATURES},
            ],
            "minItems": 2,
            "maxItems": 2,
            "description": "[rows, columns]",
        },
        "indptr": {"type": "array", "items": COUNT, "description": "rows + 1 offsets"},
        "indices": {"type": "array", "items": COUNT, "description": "column of every value"},
        "data": {"type": "array", "items": value},
    }
    if whole_chunk:
        properties["labels"] = LABELS
        properties[FEATURE_NAMES] = CHUNK_FEATURE_NAMES
    return {
        "type": "object",
        "properties": properties,
        "required": ["shape", "indptr", "indices", "data"],
        "additionalProperties": False,
        "description": "Compressed sparse rows (scipy's CSR parts).",
    }


#: The names a chunk may give its columns: matched to the selector's by name.
CHUNK_FEATURE_NAMES = {
    "type": "array",
    "items": {"type": "string", "minLength": 1, "maxLength": MAX_NAME_LENGTH},
    "uniqueItems": True,
    "description": "Optional: the name of every column. Matched to the selector's feature "
    "names: the same names in another order are reordered, other names refused (missing and "
    "unexpected ones listed); a selector created without names takes these.",
}
LABELS = {
    "type": "array",
    "minItems": 1,
    "maxItems": MAX_CHUNK_ROWS,
    "items": {
        "anyOf": [
            {"type": "integer", "minimum": -(2**63), "maximum": 2**63 - 1},
            {"type": "string", "minLength": 1, "maxLength": 256},
        ]
    },
    "description": "One class label per row (labelled methods: ocfs, ioc).",
}
ROWS_JSON = {
    "oneOf": [
        {**_dense(VALUE), "description": "Dense rows."},
        {
            "type": "object",
            "properties": {
                "rows": _dense(VALUE),
                "labels": LABELS,
                FEATURE_NAMES: CHUNK_FEATURE_NAMES,
            },
            "required": ["rows"],
            "additionalProperties": False,
            "description": "Dense rows, with one label each for labelled methods, and "
            "optionally the names of their columns.",
        },
        _csr(VALUE, whole_chunk=True),
        {
            "type": "object",
            "properties": {
                "views": {
                    "type": "object",
                    "minProperties": 1,
                    "propertyNames": {"pattern": NAME_PATTERN},
                    "additionalProperties": {
                        "oneOf": [_dense(NONNEGATIVE_VALUE), _csr(NONNEGATIVE_VALUE)]
                    },
                },
                FEATURE_NAMES: {
                    "type": "object",
                    "propertyNames": {"pattern": NAME_PATTERN},
                    "additionalProperties": CHUNK_FEATURE_NAMES,
                    "description": "Optional: the names of every view's columns.",
                },
            },
            "required": ["views"],
            "additionalProperties": False,
            "description": "Multi-view rows (omvfs): every view, the same rows.",
        },
    ]
}
BINARY = {"schema": {"type": "string", "format": "binary"}}
#: A table body (``service.wire.tables``): the schema only says it is text; its rules are in the
#: description (a string schema cannot state them).
CSV_DESCRIPTION = (
    "A header line of column names, then one line per row of comma-separated "
    "numbers (LF or CRLF; a UTF-8 BOM is skipped; only the header may quote). Columns are "
    "matched to the selector's feature names by name, as a JSON chunk's feature_names are; a "
    "selector without names takes these. Labelled methods (ocfs, ioc): the labels parameter "
    "names the label column (an integer where a label reads as one, else the string). No empty "
    "fields, no NaN or infinity."
)
CSV_BODY = {
    "schema": {"type": "string"},
    "description": CSV_DESCRIPTION,
    "examples": {
        "named columns": {"value": "f0,f1,f2\n0.0,1.5,2.0\n1.0,0.0,0.5\n"},
        "labelled, with ?labels=class (ocfs, ioc)": {
            "value": "f0,f1,f2,class\n0.0,1.5,2.0,a\n1.0,0.0,0.5,7\n"
        },
    },
}
ARROW_DESCRIPTION = (
    "An Arrow IPC stream (pyarrow.ipc.new_stream; one or more record batches) "
    "whose columns are named: matched by name as text/csv's are; integer or floating-point "
    "columns without nulls, the label column (labels parameter) of integers or strings; no "
    "dictionary-encoded columns, no compressed batches. Needs pyarrow on the server (its arrow "
    "extra); without it, 415."
)
ARROW_BODY = {**BINARY, "description": ARROW_DESCRIPTION}

ROW_BODY = {
    "required": True,
    "description": "A chunk of rows (samples x n_features); labelled methods (ocfs, ioc) need "
    "one label per row: JSON 'labels', an .npz from numpy.savez with 'labels', or the column "
    "of a text/csv or Arrow body that the labels parameter names. Values are finite with "
    f"|x| <= {MAX_ABS_VALUE:g}. Multi-view chunks (omvfs) are JSON or .npz only.",
    "content": {
        "application/json": {
            "schema": ROWS_JSON,
            "examples": {
                "dense": {"value": {"rows": [[0.0, 1.5, 2.0], [1.0, 0.0, 0.5]]}},
                "csr": {
                    "value": {
                        "shape": [2, 3],
                        "indptr": [0, 2, 3],
                        "indices": [1, 2, 0],
                        "data": [1.5, 2.0, 1.0],
                    }
                },
                "labelled (ocfs, ioc)": {
                    "value": {"rows": [[0.0, 1.5, 2.0], [1.0, 0.0, 0.5]], "labels": ["a", 7]}
                },
                "named columns": {
                    "value": {
                        "rows": [[2.0, 0.0, 1.5], [0.5, 1.0, 0.0]],
                        "feature_names": ["f2", "f0", "f1"],
                    }
                },
            },
        },
        "application/x-npy": {
            **BINARY,
            "description": "numpy.save of a 2-D numeric array (bool, int, float; never pickled).",
        },
        "application/x-npz": {
            **BINARY,
            "description": "scipy.sparse.save_npz (CSR, CSC or COO), or numpy.savez with rows "
            "(and labels, for labelled methods) or one array per view (omvfs); an optional "
            "string array feature_names names the columns (matched by name).",
        },
        CSV: CSV_BODY,
        ARROW: ARROW_BODY,
    },
}

COLUMN_BODY = {
    "required": True,
    "description": "New feature columns, n_samples values each, processed in order.",
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "properties": {
                    "columns": {
                        **_dense(VALUE),
                        "description": "One list of n_samples values per new feature.",
                    },
                    "names": {
                        "type": "array",
                        "items": {"type": "string", "minLength": 1, "maxLength": 256},
                        "uniqueItems": True,
                        "description": "Optional: one name per column, unique in the selector.",
                    },
                },
                "required": ["columns"],
                "additionalProperties": False,
            },
            "examples": {
                "named": {
                    "value": {"columns": [[0.1, 2.0, 0.0], [1.0, 1.0, 3.5]], "names": ["a", "b"]}
                }
            },
        },
        "application/x-npy": {
            **BINARY,
            "description": "n_samples x c numeric array (or 1-D for one column).",
        },
    },
}


# -- streams ----------------------------------------------------------------------------------


_FLAG_DESCRIPTIONS = {
    "labelled": "Rows with one label each (they feed labelled methods, and unlabelled row "
    "methods with the labels left out).",
    "targets": "Rows with one numeric target each (they feed methods of rows with a target, "
    "and row methods with the targets left out).",
}


def stream_create_body() -> dict[str, Any]:
    """The OpenAPI ``requestBody`` of ``POST /v1/streams``: a name and, for every chunk kind,
    the shape fields of a selector's creation (``ChunkFormat.create_schema``); ``labelled: true``
    makes a stream of labelled rows, ``targets: true`` one of rows with a target."""
    shapes = []
    examples = {}
    for kind in CHUNK_FORMATS.values():
        shape = kind.create_schema()
        properties = {
            "name": NAME_PROPERTY,
            **shape["properties"],
            **{
                flag: {
                    "type": "boolean",
                    "const": kind.flag == flag,
                    "description": _FLAG_DESCRIPTIONS[flag],
                }
                for flag in STREAM_FLAGS
            },
        }
        required = ["name", *shape["required"], *([kind.flag] if kind.flag else [])]
        shapes.append({**shape, "properties": properties, "required": required})
        examples[kind.name] = {
            "summary": f"a stream of {kind.name}",
            "value": {
                "name": f"my-{kind.name.replace(' ', '-')}",
                **kind.example(),
                **({kind.flag: True} if kind.flag else {}),
            },
        }
    return {
        "required": True,
        "content": {"application/json": {"schema": {"oneOf": shapes}, "examples": examples}},
    }


ROW_CONTENT: dict[str, Any] = ROW_BODY["content"]  # type: ignore[assignment]
COLUMN_CONTENT: dict[str, Any] = COLUMN_BODY["content"]  # type: ignore[assignment]

STREAM_CHUNK_BODY = {
    "required": True,
    "description": "A chunk of the stream's kind, in the formats a selector of that kind takes: "
    "rows (labelled rows for a labelled stream, every view for a multi-view one) or, for a "
    "stream of feature columns, columns.",
    "content": {
        "application/json": {
            "schema": {
                "anyOf": [
                    ROW_CONTENT["application/json"]["schema"],
                    COLUMN_CONTENT["application/json"]["schema"],
                ]
            },
        },
        "application/x-npy": {
            **BINARY,
            "description": "numpy.save of a 2-D numeric array: rows, or n_samples x c columns.",
        },
        "application/x-npz": ROW_CONTENT["application/x-npz"],
        CSV: {**CSV_BODY, "description": "Rows: " + CSV_DESCRIPTION},
        ARROW: {**ARROW_BODY, "description": "Rows: " + ARROW_DESCRIPTION},
    },
}
