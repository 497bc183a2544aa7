"""The client's reader of the service's ``.npy`` answers (scores, projections), without
``np.load``: numpy's own header parser (a literal parser with a size limit, never pickle),
then the data viewed in place once the header is checked against the body. A header that
promises more than the body holds, or an ``object`` dtype, is refused before anything is
allocated: the client trusts its service no more than the service trusts its producers.
"""

from __future__ import annotations

import io
import math

import numpy as np
from numpy.lib import format as npy_format

#: numpy's own default limit on the header of a file it did not write.
MAX_HEADER_SIZE = 10_000


def read_npy(body: bytes, max_ndim: int = 2) -> np.ndarray:
    """The array of a ``.npy`` body; ``ValueError`` saying why it is not one."""
    stream = io.BytesIO(body)
    version = npy_format.read_magic(stream)
    if version == (1, 0):
        shape, fortran_order, dtype = npy_format.read_array_header_1_0(
            stream, max_header_size=MAX_HEADER_SIZE
        )
    elif version in ((2, 0), (3, 0)):
        shape, fortran_order, dtype = npy_format.read_array_header_2_0(
            stream, max_header_size=MAX_HEADER_SIZE
        )
    else:
        raise ValueError(f"expected .npy format version 1.0, 2.0 or 3.0; got {version}")
    if dtype.hasobject:
        raise ValueError(f"expected numbers; got dtype {dtype} (objects are never unpickled)")
    if len(shape) > max_ndim:
        raise ValueError(f"expected at most {max_ndim} dimensions; got shape {shape}")
    count = math.prod(shape)
    payload = len(body) - stream.tell()
    if payload != count * dtype.itemsize:
        raise ValueError(
            f"the header promises shape {shape} of {dtype.itemsize}-byte values "
            f"({count * dtype.itemsize} bytes); the body holds {payload} after it"
        )
    flat = np.frombuffer(body, dtype=dtype, count=count, offset=stream.tell())
    return flat.reshape(shape[::-1]).T if fortran_order else flat.reshape(shape)
