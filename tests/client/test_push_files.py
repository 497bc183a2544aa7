"""``Client.push`` and ``AsyncClient.push`` of a data file's path (CSV, Parquet, ``.npy``,
``.npz``), read by ``sift push``'s reader: the same state as pushing the array."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from siftstream import AsyncClient, Client
from siftstream.files import FileFormatError
from tests.support.harness import ServiceProcess

NAMES = [f"f{i}" for i in range(4)]


def rows() -> tuple[np.ndarray, np.ndarray]:
    generator = np.random.default_rng(7)
    return generator.normal(size=(300, 4)), np.arange(300) % 3


def files(folder: Path, x: np.ndarray, labels: np.ndarray | None = None) -> dict[str, Path]:
    """The rows as every format (with ``labels`` in a column, or array, named ``label``)."""
    extra = [] if labels is None else ["label"]
    csv = folder / "rows.csv"
    with open(csv, "w") as handle:
        handle.write(",".join([*extra, *NAMES]) + "\n")
        for i, row in enumerate(x):
            label = [] if labels is None else [str(labels[i])]
            handle.write(",".join([*label, *(repr(float(v)) for v in row)]) + "\n")
    named = {} if labels is None else {"label": labels}
    parquet = folder / "rows.parquet"
    pq.write_table(pa.table({**{n: x[:, i] for i, n in enumerate(NAMES)}, **named}), parquet)
    npy = folder / "rows.npy"
    np.save(npy, x)
    npz = folder / "rows.npz"
    if labels is None:
        np.savez(npz, rows=x)
    else:
        np.savez(npz, rows=x, label=labels)
    return {"csv": csv, "parquet": parquet, "npy": npy, "npz": npz}


@pytest.mark.parametrize("kind", ["csv", "parquet", "npy", "npz"])
def test_a_file_path_pushes_the_same_rows_as_its_array(
    sift: Client, selector_name: str, tmp_path: Path, kind: str
) -> None:
    x, _ = rows()
    path = files(tmp_path, x)[kind]
    by_file, by_array = f"{selector_name}-file", f"{selector_name}-array"
    for name in (by_file, by_array):
        sift.create(name, "variance", n_features=4, feature_names=NAMES)
    # A str path and an os.PathLike alike.
    target = str(path) if kind in ("csv", "npz") else path
    summary = sift.push(by_file, target, chunk_rows=70)
    assert summary.seen == 300 and len(summary.receipts) == 5
    sift.push(by_array, x, chunk_rows=70)
    pushed, expected = sift.describe(by_file), sift.describe(by_array)
    assert pushed.rows_seen == expected.rows_seen == 300
    np.testing.assert_allclose(sift.weights(by_file).weights, sift.weights(by_array).weights)
    np.testing.assert_allclose(sift.weights(by_file).weights, x.var(axis=0), rtol=1e-9)


def test_a_files_labels_reach_a_labelled_method(
    sift: Client, selector_name: str, tmp_path: Path
) -> None:
    x, labels = rows()
    by_array = f"{selector_name}-array"
    sift.create(by_array, "ocfs", n_features=4, feature_names=NAMES)
    sift.push(by_array, x, y=labels)
    expected = sift.weights(by_array).weights
    # The labels column (or array) named by y, which is then not a feature.
    for kind in ("csv", "parquet", "npz"):
        by_file = f"{selector_name}-{kind}"
        sift.create(by_file, "ocfs", n_features=4, feature_names=NAMES)
        sift.push(by_file, files(tmp_path, x, labels)[kind], y="label", chunk_rows=70)
        np.testing.assert_allclose(sift.weights(by_file).weights, expected)
    # Labels given apart, one per row of a file without them.
    by_npy = f"{selector_name}-npy"
    sift.create(by_npy, "ocfs", n_features=4)
    sift.push(by_npy, files(tmp_path, x)["npy"], y=labels, chunk_rows=100)
    np.testing.assert_allclose(sift.weights(by_npy).weights, expected)


def test_the_async_client_pushes_a_file_too(
    service: ServiceProcess, selector_name: str, tmp_path: Path
) -> None:
    x, _ = rows()
    path = files(tmp_path, x)["parquet"]

    async def push() -> tuple[int | None, np.ndarray]:
        async with AsyncClient(service.url) as client:
            await client.create(selector_name, "variance", n_features=4, feature_names=NAMES)
            summary = await client.push(selector_name, path)
            return summary.seen, (await client.weights(selector_name)).weights

    seen, weights = asyncio.run(push())
    assert seen == 300
    np.testing.assert_allclose(weights, x.var(axis=0), rtol=1e-9)


def test_headers_are_matched_by_name_and_unknown_files_refused(
    sift: Client, selector_name: str, tmp_path: Path
) -> None:
    x, _ = rows()
    sift.create(selector_name, "variance", n_features=4, feature_names=NAMES)
    # Columns in another order land on the features of their names, as with sift push.
    shuffled = tmp_path / "shuffled.csv"
    order = [2, 0, 3, 1]
    with open(shuffled, "w") as handle:
        handle.write(",".join(NAMES[i] for i in order) + "\n")
        for row in x:
            handle.write(",".join(repr(float(row[i])) for i in order) + "\n")
    sift.push(selector_name, shuffled)
    np.testing.assert_allclose(sift.weights(selector_name).weights, x.var(axis=0), rtol=1e-9)
    text = tmp_path / "rows.txt"
    text.write_text("f0,f1\n1,2\n")
    with pytest.raises(FileFormatError, match=r"expected a file ending in .csv, .npy"):
        sift.push(selector_name, text)
    with pytest.raises(FileFormatError, match="no such file"):
        sift.push(selector_name, str(tmp_path / "missing.parquet"))
    assert sift.describe(selector_name).rows_seen == 300
